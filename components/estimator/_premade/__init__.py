"""The model_fns of the pipeline DSL's premade declarations (``model_fns``) over transformed
ids (``inputs``); ``estimator.canned`` shares their parts."""
