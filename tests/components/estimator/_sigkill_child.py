"""Child process of test_sigkill_resume: trains the fixture model slowly (a sleep per loop) to
``max_steps`` in ``model_dir``; records, right after restoring, the global step it starts from
and its optimizer state, in ``out``.

``python -m tests.components.estimator._sigkill_child MODEL_DIR OUT MAX_STEPS SLEEP_SECS``
"""

import json
import sys
import time

from estflow.estimator import SessionRunHook
from tests.components.estimator import _hook_fixtures as fx


class _Record(SessionRunHook):
    def __init__(self, estimator, out: str, sleep: float) -> None:
        self.estimator, self.out, self.sleep = estimator, out, sleep

    def after_create_session(self, session, coord) -> None:
        optimizers = self.estimator._optimizers.optimizers  # test-only view of engine state
        state = {"start_step": session.global_step,
                 "optimizer": [v.numpy().tolist() for v in optimizers[0].variables]
                 if optimizers else None}
        with open(self.out, "w") as f:
            json.dump(state, f)

    def after_run(self, run_context, run_values) -> None:
        time.sleep(self.sleep)


def main(model_dir: str, out: str, max_steps: int, sleep: float) -> None:
    estimator = fx.estimator(model_dir)
    estimator.train(fx.whole_batch_input_fn, hooks=[_Record(estimator, out, sleep)],
                    max_steps=max_steps)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
