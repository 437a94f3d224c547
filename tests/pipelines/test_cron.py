"""Cron for KFP schedules: five fields become six (seconds first); every field is validated."""

import pytest

from estflow.pipelines.kubeflow.cron import MACROS
from estflow.pipelines.kubeflow.cron import CronError
from estflow.pipelines.kubeflow.cron import to_kfp_cron


@pytest.mark.parametrize("expr, expected", [
    ("0 3 * * *", "0 0 3 * * *"),
    ("*/15 * * * *", "0 */15 * * * *"),
    ("30 9-17 * * 1-5", "0 30 9-17 * * 1-5"),
    ("0 0 1,15 * *", "0 0 0 1,15 * *"),
    ("0 6-18/3 * JAN-MAR mon-fri", "0 0 6-18/3 * JAN-MAR mon-fri"),
    ("59 23 31 12 6", "0 59 23 31 12 6"),
    ("  0   3 * *  *  ", "0 0 3 * * *"),  # any spacing; one space out
    ("5/10 * * * *", "0 5/10 * * * *"),  # "a/n": from a to the end, every n (robfig/cron)
])
def test_five_fields_get_a_leading_zero_second(expr, expected):
    assert to_kfp_cron(expr) == expected


@pytest.mark.parametrize("expr", [
    "0 0 3 * * *",
    "30 */5 * * * *",
    "0 0 9 ? * 2-6",  # KFP's documented example: "?" in a day field
    "0 0 12 ? JAN,JUL SUN",
])
def test_six_fields_are_kept(expr):
    assert to_kfp_cron(expr) == expr


@pytest.mark.parametrize("macro, expected", [
    ("@hourly", "0 0 * * * *"),
    ("@daily", "0 0 0 * * *"),
    ("@midnight", "0 0 0 * * *"),
    ("@weekly", "0 0 0 * * 0"),
    ("@monthly", "0 0 0 1 * *"),
    ("@yearly", "0 0 0 1 1 *"),
    ("@annually", "0 0 0 1 1 *"),
    ("@DAILY", "0 0 0 * * *"),
])
def test_macros_become_explicit_six_fields(macro, expected):
    assert to_kfp_cron(macro) == expected


def test_every_macro_expands_to_a_valid_six_field_cron():
    for expansion in MACROS.values():
        assert to_kfp_cron(expansion) == expansion


@pytest.mark.parametrize("expr, field, fragment", [
    ("0 25 * * *", "hour", "hour field '25' is out of range 0-23 in cron '0 25 * * *'"),
    ("60 * * * *", "minute", "minute field '60' is out of range 0-59"),
    ("60 0 * * * *", "second", "second field '60' is out of range 0-59"),
    ("0 0 0 * *", "day-of-month", "day-of-month field '0' is out of range 1-31"),
    ("0 0 32 * *", "day-of-month", "day-of-month field '32' is out of range 1-31"),
    ("0 0 * 13 *", "month", "month field '13' is out of range 1-12"),
    ("0 0 * 0 *", "month", "month field '0' is out of range 1-12"),
    ("0 0 * FOO *", "month", "month field 'FOO' is not a number or a name JAN-DEC"),
    ("0 0 * * 7", "day-of-week", "day-of-week field '7' is out of range 0-6"),
    ("0 0 * * FUN", "day-of-week", "day-of-week field 'FUN' is not a number or a name SUN-SAT"),
    ("x * * * *", "minute", "minute field 'x' is not a number"),
    ("-1 * * * *", "minute", "minute field '-1' is an incomplete range"),
    ("0 1,25 * * *", "hour", "hour field '1,25' has '25', which is out of range 0-23"),
    ("0 1,,2 * * *", "hour", "hour field '1,,2' has an empty list element"),
    ("0 5-3 * * *", "hour", "hour field '5-3' is a reversed range (5 is after 3)"),
    ("0 5- * * *", "hour", "hour field '5-' is an incomplete range"),
    ("0 1-2-3 * * *", "hour", "hour field '1-2-3' has '2-3', which is not a number"),
    ("*/0 * * * *", "minute", "minute field '*/0' has step '0', expected a step 1-59"),
    ("0 */24 * * *", "hour", "hour field '*/24' has step '24', expected a step 1-23"),
    ("0 */x * * *", "hour", "hour field '*/x' has step 'x'"),
    ("0 1-5/ * * *", "hour", "hour field '1-5/' has step ''"),
    ("0 /5 * * *", "hour", "hour field '/5' has nothing before '/'"),
    ("? * * * *", "minute", "minute field '?' is not a number"),  # "?" only in day fields
])
def test_an_invalid_field_is_named(expr, field, fragment):
    with pytest.raises(CronError) as info:
        to_kfp_cron(expr)
    assert str(info.value).startswith(f"{field} field ")
    assert fragment in str(info.value)
    assert f"in cron '{expr}'" in str(info.value)
    assert info.value.field == field


def test_the_message_names_field_value_range_and_expression():
    with pytest.raises(ValueError) as info:
        to_kfp_cron("0 25 * * *")
    assert str(info.value) == "hour field '25' is out of range 0-23 in cron '0 25 * * *'"


@pytest.mark.parametrize("expr, fragment", [
    ("", "has 0 fields, expected 5"),
    ("* * * *", "has 4 fields, expected 5 (minute hour day-of-month month day-of-week) or 6"),
    ("0 0 0 * * * *", "has 7 fields"),
    ("@fortnightly", "unknown cron macro '@fortnightly', expected one of @annually"),
    ("@every 5m", "unknown cron macro '@every 5m'"),
])
def test_a_malformed_expression_says_why(expr, fragment):
    with pytest.raises(CronError) as info:
        to_kfp_cron(expr)
    assert fragment in str(info.value)
    assert info.value.field is None


def test_cron_errors_are_value_errors_and_reject_non_strings():
    assert issubclass(CronError, ValueError)
    with pytest.raises(ValueError, match="expected a string"):
        to_kfp_cron(None)
