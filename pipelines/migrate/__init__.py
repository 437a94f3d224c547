"""``estflow migrate``: the codemod from tf.estimator (TF <= 2.15) programs to estflow.

:mod:`.codemod` is the entry point (:func:`~.codemod.migrate_source`); :mod:`.imports`,
:mod:`.calls`, :mod:`.tf1`, :mod:`.keras` and :mod:`.surface` are its rewrites, :mod:`.tables`
the names they map.
"""
