"""Resource predictors for jobs: GPU utilisation and peak GPU memory (the Horus prediction engine).

Models: :mod:`.roofline` and :mod:`.regressors` (utilisation), :mod:`.memory` (peak memory),
:mod:`.calibration` (per-GPU correction), :mod:`.gpu_specs` (data-sheet constants). A trained
predictor is a :class:`~.bundle.Predictor`, saved and loaded by :mod:`.persist`; the one shipped in
``data/default/`` is loaded by :mod:`.default` and rebuilt by :mod:`.build_default`. Inputs come
from :mod:`.graph_source` and :mod:`.features`; :mod:`.hook` fills simulator jobs. Training and
evaluation: :mod:`.profiles` (profile tables), :mod:`.train`, :mod:`.evaluate`,
:mod:`.memory_eval`, :mod:`.util_mlp_eval` and :mod:`.report`.

Import-light like its parent: import the modules you need.
"""
