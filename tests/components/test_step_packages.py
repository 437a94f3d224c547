"""Each step is a package ``estflow.components.<step>`` run by its ``__main__.py``: importing
the package stays light, a KFP task's ``step.main([...])`` reaches the entry point, and a
prestarted process imports what the entry point imports (not the light ``__init__``)."""

import json
import os
import subprocess
import sys

import pytest

from estflow.components._runtime import prestart

STEPS = ("ingest", "transform", "train", "evaluate", "predict", "serve", "preprocess", "tfjob")


def test_importing_a_step_package_imports_no_tensorflow_or_beam():
    code = ("import json, sys\n"
            + "".join(f"from estflow.components import {s}\n" for s in STEPS)
            + "print(json.dumps({'heavy': sorted(m for m in sys.modules if m.split('.')[0] in "
              "{'tensorflow', 'apache_beam', 'tensorflow_transform'}), 'mains': "
              f"[callable(m.main) for m in ({', '.join(STEPS)},)]}}))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == {"heavy": [], "mains": [True] * 8}


def test_a_step_packages_main_is_its_entry_point(capsys):
    """What a KFP task calls (``from estflow.components import ingest as step``)."""
    from estflow.components import ingest

    with pytest.raises(SystemExit) as exit_:
        ingest.main(["--help"])

    assert exit_.value.code == 0
    assert "usage: estflow.components.ingest [-h] --spec SPEC --examples DIR" in capsys.readouterr().out


def test_preimport_of_a_package_runs_its_main_modules_imports(tmp_path, monkeypatch):
    package = tmp_path / "pre_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(
        "import pre_pkg_dep\nraise SystemExit('the entry point itself must not run')\n")
    (tmp_path / "pre_pkg_dep.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    prestart.preimport("pre_pkg")

    assert sys.modules["pre_pkg_dep"].LOADED and "pre_pkg.__main__" not in sys.modules
