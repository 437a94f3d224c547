"""Which time zone a KFP schedule's cron fires in, and converting a cron to it.

KFP's recurring runs carry no time zone: the ScheduledWorkflow controller reads its cron in the
zone of its ``CRON_SCHEDULE_TIMEZONE`` variable, which the install sets from the
``cronScheduleTimezone`` key of the ``pipeline-install-config`` ConfigMap (``"UTC"`` in
kubeflow/pipelines' manifests, which Kubeflow's use; empty means the controller's local zone).
So ``0 3 * * *`` is 03:00 UTC on a default install, whoever submits it.

:func:`to_scheduler_zone` rewrites a cron written for one zone (``--timezone Europe/Paris``)
into the scheduler's zone when one cron can say it all year: the two zones keep the same offset
(no daylight-saving change between them) and the shifted times stay within the day, or move by a
whole day with only the day-of-week restricted. Anything else is refused with the reason and the
alternatives, never converted approximately.

Example:
    >>> to_scheduler_zone("0 0 3 * * *", "Asia/Kolkata", "UTC")
    '0 30 21 * * *'
"""

from __future__ import annotations

import datetime
import zoneinfo

__all__ = ["DEFAULT_SCHEDULER_ZONE", "to_scheduler_zone", "zone"]

# pipeline-install-config's cronScheduleTimezone in kubeflow/pipelines' manifests.
DEFAULT_SCHEDULER_ZONE = "UTC"

_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


def zone(name: str, option: str = "--timezone") -> zoneinfo.ZoneInfo:
    """The IANA time zone ``name``.

    Raises:
        ValueError: not a time zone name (the message names ``option``).
    """
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise ValueError(f"Received an invalid value for `{option}`, expected an IANA time zone "
                         f"name such as Europe/Paris or UTC (without the system's time zone "
                         f"database, pip install tzdata). Received: {name!r}") from None


def to_scheduler_zone(kfp_cron: str, timezone: str, scheduler_timezone: str) -> str:
    """``kfp_cron`` (six fields, seconds first) written for ``timezone``, rewritten to fire at
    the same instants in ``scheduler_timezone``.

    Raises:
        ValueError: an unknown zone, or no single cron in the scheduler's zone fires at those
            times all year (the message says why and what to do instead).
    """
    source, target = zone(timezone), zone(scheduler_timezone, "--scheduler-timezone")
    if timezone == scheduler_timezone:
        return kfp_cron
    shift = _constant_shift(source, target, timezone, scheduler_timezone)
    second, minute, hour, dom, month, dow = kfp_cron.split()
    if shift == 0:
        return kfp_cron
    refuse = _refusal(kfp_cron, timezone, scheduler_timezone)
    if shift % 60 == 0 and hour == "*":
        return kfp_cron  # every hour, at the same minutes
    hours = _numbers(hour)
    minutes = _numbers(minute) if shift % 60 else None
    if hours is None or (shift % 60 and (minutes is None or len(minutes) != 1)):
        raise refuse("the hour (and, for a zone a fraction of an hour apart, the minute) must "
                     "be plain numbers to be shifted")
    if minutes is not None:
        total = [h * 60 + minutes[0] - shift for h in hours]
        minute = str(total[0] % 60)
    else:
        total = [h * 60 - shift for h in hours]
    days = {t // (24 * 60) for t in total}
    if len(days) > 1:
        raise refuse("its times fall on different days there")
    new_hour = ",".join(str(h) for h in sorted({t % (24 * 60) // 60 for t in total}))
    (day,) = days
    if day:
        if dom not in ("*", "?") or month != "*":
            raise refuse("its times move to another day there, and its day-of-month or month "
                         "field cannot move with them")
        dow = _shift_weekdays(dow, day)
        if dow is None:
            raise refuse("its times move to another day there, and its day-of-week field is "
                         "not a list of days")
    return " ".join((second, minute, new_hour, dom, month, dow))


def _constant_shift(source: zoneinfo.ZoneInfo, target: zoneinfo.ZoneInfo, name: str,
                    scheduler: str) -> int:
    """Minutes ``source`` is ahead of ``target``, the same all year, else ValueError."""
    start = datetime.datetime.now(datetime.UTC).replace(minute=0, second=0, microsecond=0)
    shifts = set()
    for step in range(0, 2 * 366 * 24, 6):  # every 6 hours for two years: every DST change
        at = start + datetime.timedelta(hours=step)
        shifts.add(int((at.astimezone(source).utcoffset()
                        - at.astimezone(target).utcoffset()).total_seconds() // 60))
    if len(shifts) > 1:
        low, high = sorted(shifts)[0], sorted(shifts)[-1]
        raise ValueError(
            f"{name} is {_hours(low)} to {_hours(high)} from {scheduler} over the year "
            f"(daylight saving), so no one cron in {scheduler} (the KFP scheduler's time zone) "
            f"fires at the same {name} time all year. Either set the scheduler's zone to {name} "
            "(cronScheduleTimezone in the pipeline-install-config ConfigMap) and pass "
            f"--scheduler-timezone {name}, or write the cron in {scheduler} without --timezone")
    return shifts.pop()


def _hours(minutes: int) -> str:
    sign = "+" if minutes >= 0 else "-"
    h, m = divmod(abs(minutes), 60)
    return f"{sign}{h}h" + (f"{m:02d}" if m else "")


def _refusal(kfp_cron: str, timezone: str, scheduler: str):
    def refuse(why: str) -> ValueError:
        return ValueError(f"cron '{kfp_cron}' in {timezone} cannot be written as one cron in "
                          f"{scheduler} (the KFP scheduler's time zone): {why}. Write it in "
                          f"{scheduler} without --timezone, or set the scheduler's zone to "
                          f"{timezone} (cronScheduleTimezone in pipeline-install-config) and "
                          f"pass --scheduler-timezone {timezone}")
    return refuse


def _numbers(field: str) -> list[int] | None:
    """The values of a field that is a list of plain numbers, else None."""
    items = field.split(",")
    return [int(i) for i in items] if all(i.isdigit() for i in items) else None


def _shift_weekdays(dow: str, days: int) -> str | None:
    """``dow`` moved by ``days`` (``*`` stays), as a list of numbers; None when it is not a
    list of days and ranges."""
    if dow in ("*", "?"):
        return dow
    values = set()
    for item in dow.split(","):
        start, _, end = item.partition("-")
        if "/" in item or not all(_weekday(p) is not None for p in (start, end or start)):
            return None
        values.update(range(_weekday(start), _weekday(end or start) + 1))
    return ",".join(str(d) for d in sorted({(v + days) % 7 for v in values}))


def _weekday(text: str) -> int | None:
    if text.upper() in _WEEKDAYS:
        return _WEEKDAYS.index(text.upper())
    return int(text) % 7 if text.isdigit() else None
