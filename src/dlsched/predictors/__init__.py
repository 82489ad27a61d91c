"""Resource predictors for jobs: GPU utilisation and peak GPU memory (the Horus prediction engine).

Kept import-light on purpose: the simulator imports ``dlsched.predictors`` without pulling in
scikit-learn, LightGBM or XGBoost. Import the sub-modules you need (``regressors``, ``memory``,
``bundle``, ``default``, ``hook``); heavy libraries load only when a model is fitted or loaded.
"""
