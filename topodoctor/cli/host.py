"""``record``, ``rules``, ``explain`` and ``expect``: a host recorded, the rules listed and
explained, and the expectations a known-good host sets for its type."""

from __future__ import annotations

from typing import TYPE_CHECKING

from topodoctor.cli.args import ExpectArgs, ExplainArgs, RecordArgs, RulesArgs
from topodoctor.cli.io import Env
from topodoctor.core import codec, fileio
from topodoctor.core.budget import Budget
from topodoctor.core.errors import InputError
from topodoctor.core.text import plural
from topodoctor.model.outcome import DONE
from topodoctor.report.rule_docs import explain_markdown, rules_markdown
from topodoctor.report.rules import rules_json, rules_text
from topodoctor.service import check as doctor
from topodoctor.service import recording
from topodoctor.service.fitness import fitness_pass
from topodoctor.service.request_check import LEVEL_TIMEOUT_S

if TYPE_CHECKING:
    from topodoctor.service.passes import Pass


def run_record(args: RecordArgs, env: Env) -> int:
    """Record every NVML call and sysfs read of a live probe to ``--output`` (or list the bundled
    recordings)."""
    if args.list_bundled:
        env.render(lambda: env.emit("\n".join(recording.bundled_recordings())))
        return DONE.exit_code
    if args.output is None:
        raise InputError("record needs --output FILE (or --list)")
    budget = Budget.start(args.timeout)
    doc, gpus = recording.record(args.label or "unlabelled", not args.no_scrub, args.sysfs_root, budget)
    fileio.write_atomic(args.output, fileio.dumps_strict(doc, separators=(",", ":")) + "\n", "recording")
    calls, reads = plural(len(doc["nvml"]), "NVML call"), plural(len(doc["sysfs"]), "sysfs read")
    env.say(f"recorded {calls} and {reads} ({plural(gpus, 'GPU')}) to {args.output}")
    return DONE.exit_code


def run_rules(args: RulesArgs, env: Env) -> int:
    """Every code listed (text, JSON), or docs/rules.md."""
    # The rule documentation loads every rule family: only for this command.

    if args.markdown:
        env.write(rules_markdown())
    else:
        env.render(lambda: env.emit_json(rules_json()) if args.fmt == "json" else env.emit(rules_text()))
    return DONE.exit_code


def run_explain(args: ExplainArgs, env: Env) -> int:
    """One code's documentation."""
    text = explain_markdown(args.code)
    if args.markdown:
        env.write(text)
    else:  # rendered for a person: headings, emphasis and lists at the terminal's width
        from topodoctor.report.terminal import print_markdown  # rich: only a rendered page draws

        env.render(lambda: print_markdown(text, env.console()))
    return DONE.exit_code


def run_expect(args: ExpectArgs, env: Env) -> int:
    """Expectations from a known-good host, written unless the host has error findings."""
    passes: tuple[Pass, ...] = ()
    timeout = args.timeout
    if args.level != "static":
        passes = (fitness_pass(args.level, "node"),)
        timeout = max(timeout, LEVEL_TIMEOUT_S[args.level])
    source = doctor.Source(args.replay, args.sysfs_root)
    base = doctor.baseline(source, Budget.start(timeout), passes, args.force)
    if base.failing:
        for f in base.failing:
            env.say(f"  {f.code} {f.severity} {f.subject}: {f.message}")
        what = plural(len(base.failing), "error finding")
        raise env.fail(f"not writing {args.output}: this host has {what} (--force)", base.exit_code)
    e = base.expectations
    fileio.write_atomic(args.output, codec.dumps(e), "expectations")
    measured = "".join(f", {k} {v:g}" for k, v in e.fitness.items())
    where = "standard output" if str(args.output) == "-" else args.output
    env.say(f"wrote {where}: {e.gpu_count} x {e.gpu_model}, {e.nvlinks_per_pair} NVLinks per pair{measured}")
    return base.exit_code
