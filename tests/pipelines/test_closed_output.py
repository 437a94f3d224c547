"""``estflow run`` whose reader goes away (``estflow run p.py | head``): the step in flight is
not failed for it (it once was, as "Broken pipe" naming the step's log.txt); the run goes on
with no more progress lines, says so on stderr once, and every line of the step still reaches
its log.

The step is a real process run by the runner's own ``run_process``, its progress echoed
through ``estflow run``'s echo, in a child interpreter whose stdout is a pipe the test closes
at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap

LINES = 20000

CHILD = textwrap.dedent(f"""
    import sys
    from pathlib import Path
    from estflow.pipelines.cli import colour
    from estflow.pipelines.local.processes import StepRun, run_process

    folder = Path(sys.argv[1])
    step = ("import sys\\n"
            "for i in range({LINES}): print(f'[s progress] line {{i}}', flush=i % 100 == 0)\\n")
    echo = colour.survive_closed_output(colour.terminal_echo(), "estflow run")
    echo("==> step 1/1: s")
    run_process(StepRun("s", (sys.executable, "-c", step), folder, echo), folder / "log.txt",
                {{}})
    echo("<== s done")
    print("summary line", flush=True)
    print("after the step", file=sys.stderr)
""")


def test_a_run_whose_reader_left_goes_on_and_logs_every_line(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader goes away before the first line
    with proc.stderr:
        err = proc.stderr.read()
    assert proc.wait(120) == 0, err
    assert err.count("the reader of its output went away; it goes on") == 1, err
    assert "after the step" in err and "Traceback" not in err and "Broken pipe" not in err
    logged = (tmp_path / "log.txt").read_text().splitlines()
    assert logged == [f"[s progress] line {i}" for i in range(LINES)]
