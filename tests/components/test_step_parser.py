"""The step contract seen from both sides: the argv a runner builds from a contract row
(pipelines.plan) is exactly what the step's entry point, whose parser is built from the same
row (components._runtime.entry), accepts and reads back."""

import pytest

from estflow.components._runtime.entry import step_parser
from estflow.dsl import contracts
from estflow.pipelines.plan import PlannedStep

ROWS = [*contracts.STEPS, contracts.PREPROCESS, contracts.TFJOB]
# One value an option might be given, by type: text values that look like options on purpose
# (a KFP parameter's value is passed as its own argument, whatever it starts with).
VALUES = {"str": "--runner=PortableRunner --job_endpoint=localhost:1", "int": "3",
          "float": "2.5", "bool": "true"}
TYPES = {"str": str, "int": int, "float": float, "bool": lambda text: text == "true"}


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.name}:{r.module}" for r in ROWS])
def test_the_argv_a_runner_builds_is_what_the_step_reads(row):
    options = {o.flag: VALUES[o.type] for o in row.options}
    if "gzip-level" in options:
        options["gzip-level"] = "9"
    planned = PlannedStep.from_step(row, {a: "upstream" for a in row.inputs}, options)
    paths = {a: f"/artifacts/{a}" for a in (*row.inputs, *row.outputs)}
    args, extra = step_parser(row).parse_known_args(planned.argv("spec.json", paths))
    assert extra == []
    assert args.spec == "spec.json"
    for artifact in (*row.inputs, *row.outputs):
        assert getattr(args, artifact) == f"/artifacts/{artifact}"
    for option in row.options:
        expected = TYPES[option.type](options[option.flag])
        assert getattr(args, option.flag.replace("-", "_")) == expected


@pytest.mark.parametrize("form", [
    ["--beam-options", "--direct_num_workers=2"],
    ["--beam-options=--direct_num_workers=2"],
    ["--beam-options", "--direct_num_workers=2", "--direct_running_mode=multi_processing"],
])
def test_beam_options_in_every_form(form):
    parser = step_parser(contracts.step_named("transform"))
    args, extra = parser.parse_known_args(
        ["--spec", "s", "--examples", "e", "--transformed", "t", *form])
    assert args.beam_options == "--direct_num_workers=2"
    assert extra == form[2:]


def test_a_missing_artifact_or_a_bad_choice_is_refused(capsys):
    parser = step_parser(contracts.step_named("ingest"))
    with pytest.raises(SystemExit):
        parser.parse_known_args(["--spec", "s"])
    assert "--examples" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_known_args(["--spec", "s", "--examples", "e", "--gzip-level", "0"])
    assert "gzip-level" in capsys.readouterr().err
