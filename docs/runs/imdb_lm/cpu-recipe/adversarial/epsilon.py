import numpy as np
from experiments.sentiment import lstm_lm
E = np.load('runs/imdb_lm/cpu512-2k/lm.npz')['trunk/embed/embedding'].astype(np.float64)
reviews = lstm_lm.cap_vocabulary(lstm_lm.load_reviews('runs/imdb_lm/reviews.npz'), 10000)
counts = sum(np.bincount(reviews.ids[s].flat, minlength=10000) for s in ('train', 'unlabelled'))
f = counts / counts.sum()
mean = f @ E                                   # (De,)
var = f @ (E - mean) ** 2                      # (De,), Miyato et al.'s per-dimension variance
rms = float(np.sqrt(var.mean()))
print("per-dim std: rms", round(rms, 4), "mean", round(float(np.sqrt(var).mean()), 4))
print("eps carried from 5 at 256 unit-variance dims:", round(5 * rms * np.sqrt(128 / 256), 3))
