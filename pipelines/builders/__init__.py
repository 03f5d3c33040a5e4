"""tfds builders of the zoo's raw datasets, one module each; `BUILDERS` maps names to classes."""

from pipelines.builders.couplet import Couplet
from pipelines.builders.fra_eng import FraEng
from pipelines.builders.imdb import Imdb
from pipelines.builders.question_pairs import QuestionPairs

BUILDERS = {"imdb": Imdb, "fra_eng": FraEng, "couplet": Couplet, "question_pairs": QuestionPairs}
