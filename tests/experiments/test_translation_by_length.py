"""BLEU by source length (experiments.translation.metrics.scores_by_length and the
`by-length translation` command): each bucket is sacreBLEU of its own lines, every source once against all of its
references."""

from __future__ import annotations

import json

import pytest
import sacrebleu

from experiments import cli
from experiments.translation import metrics

# Sources of 1, 3, 5 and 7 words; the 3-word one has two references.
SOURCES = ["Go.", "I am here.", "I am here.", "She is at the door.",
           "They will come back home tomorrow morning."]
REFERENCES = ["Va !", "Je suis ici.", "Je suis là.", "Elle est à la porte.",
              "Ils rentreront à la maison demain matin."]
GREEDY = ["Va !", "Je suis là.", "Je suis là.", "Elle est à la fenêtre.",
          "Ils viendront demain matin."]
BEAM = ["Va !", "Je suis ici.", "Je suis ici.", "Elle est à la porte.",
        "Ils rentreront demain matin à la maison."]


def test_each_bucket_is_sacrebleu_of_its_own_lines():
  buckets = metrics.scores_by_length(GREEDY, REFERENCES, SOURCES, edges=[2, 4, 6])
  assert [b.label for b in buckets] == ["1-2", "3-4", "5-6", "7+"]
  assert [b.lines for b in buckets] == [1, 2, 1, 1]
  assert [b.scores.sources for b in buckets] == [1, 1, 1, 1]
  # 3-4 words: one source, its one hypothesis against both references.
  expected = sacrebleu.BLEU().corpus_score(["Je suis là."], [["Je suis ici."], ["Je suis là."]])
  assert buckets[1].scores.bleu == pytest.approx(expected.score)
  assert buckets[1].scores.bleu == pytest.approx(100.0)
  expected = sacrebleu.BLEU().corpus_score([GREEDY[4]], [[REFERENCES[4]]])
  assert buckets[3].scores.bleu == pytest.approx(expected.score)
  assert "case:mixed" in buckets[0].scores.signatures["bleu"]


def test_an_empty_bucket_has_no_scores_and_bad_edges_are_refused():
  buckets = metrics.scores_by_length(GREEDY, REFERENCES, SOURCES, edges=[1, 2])
  assert [b.label for b in buckets] == ["1", "2", "3+"]
  assert buckets[1].lines == 0 and buckets[1].scores is None
  for edges in ([], [3, 3], [4, 2], [0, 2]):
    with pytest.raises(ValueError, match="edges"):
      metrics.scores_by_length(GREEDY, REFERENCES, SOURCES, edges=edges)


def _write_run(folder, beam=BEAM):
  folder.mkdir()
  rows = ["source\treference\tgreedy\tbeam"]
  rows += ["\t".join(r) for r in zip(SOURCES, REFERENCES, GREEDY, beam)]
  (folder / "test_translations.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
  return str(folder)


def test_command_prints_one_row_per_bucket_for_every_run(tmp_path, capsys):
  plain = _write_run(tmp_path / "translation-seq2seq_cpu")
  attention = _write_run(tmp_path / "translation-bahdanau_cpu", beam=GREEDY)
  out_json = tmp_path / "by_length.json"
  assert cli.main(["by-length", "translation", plain, attention, "--edges", "2", "6", "--json", str(out_json)]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert lines[0] == ("| source words | sources | translation-seq2seq_cpu greedy | "
                      "translation-seq2seq_cpu beam | translation-bahdanau_cpu greedy | "
                      "translation-bahdanau_cpu beam |")
  assert [line.split(" | ")[0] for line in lines[2:5]] == ["| 1-2", "| 3-6", "| 7+"]
  record = json.loads(out_json.read_text(encoding="utf-8"))
  three_to_six = record["runs"]["translation-seq2seq_cpu"]["beam"][1]
  assert three_to_six["bucket"] == "3-6" and three_to_six["sources"] == 2
  expected = sacrebleu.BLEU().corpus_score(
      ["Je suis ici.", "Elle est à la porte."],
      [["Je suis ici.", "Elle est à la porte."], ["Je suis là.", None]])
  assert three_to_six["bleu"] == pytest.approx(expected.score)
  assert "BLEU: sacreBLEU nrefs:" in "\n".join(lines)


def test_command_names_a_missing_or_malformed_file(tmp_path, capsys):
  assert cli.main(["by-length", "translation", str(tmp_path / "nowhere")]) == 2
  assert "nowhere: no such file (a run writes test_translations.tsv" in capsys.readouterr().err
  bad = tmp_path / "bad.tsv"
  bad.write_text("source\treference\tgreedy\tbeam\nGo.\tVa !\n", encoding="utf-8")
  assert cli.main(["by-length", "translation", str(bad)]) == 2
  assert "bad.tsv, line 2: expected 4 tab-separated fields, got 2" in capsys.readouterr().err
