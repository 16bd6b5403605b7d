"""Checking a program against its own contract: the verdict for a digest, and what a launch does with it.

`check` always asks for a verdict (the `check` command, `jev_check`);
`check_for_launch` applies the host's mode for the program's language: `error`
refuses a program with type errors (`TypeScriptError`), `warn` lets it run and
reports them, `off` skips the compiler. A verdict is looked up by digest in
memory, then on disk, and only then compiled; one compile per digest at a
time, and at most two compilers at once in a process (one per core), shared
fairly between programs (slots.py). A check that a cap stopped is remembered
by digest too, so a relaunch under the same caps is refused (or, under
`warn`, runs unchecked and says so) at once.

The program's language is the one it declares (`Program.language`, which a
program file's suffix gives: `.ts` is TypeScript, checked strictly, whatever
its code); without one, the reading the sandbox runs: code with nothing
TypeScript-only in it is JavaScript (checked with checkJs), anything else is
TypeScript. The sandbox still runs TypeScript by erasing its annotations
(`typecheck.erasure`); the compiler only checks.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from ..contract.config import HostConfig, TypecheckConfig
from ..contract.languages import CheckerStatus, CheckMode, Language, TypeCheckOutcome
from ..contract.program import Program
from ..errors import JevError, TypeScriptError, clip_error
from . import cache
from .compiler import Compiler, CompilerStopped, Missing, locate
from .declarations import DECLARATIONS_FILE, render, schema_type, wrap
from .verdict import CheckReport, CheckResult, CompilerVerdict, Stopped

#: Bump when the options, the wrapper or the meaning of a verdict change (part of every digest).
CHECKER_VERSION = 3
#: Compilers running at once in one process.
MAX_COMPILERS = max(1, min(2, os.cpu_count() or 1))
# The guest's built-ins: ES2025 and the later parts QuickJS-ng already has (Array.fromAsync,
# DisposableStack, Error.isError). No DOM, no Node.
LIB = ("es2025", "esnext.array", "esnext.disposable", "esnext.error")
_COMMON_OPTIONS: dict[str, Any] = {
    "target": "esnext", "lib": list(LIB), "types": [], "noEmit": True,
    # Only the two files given: no import, `/// <reference>` or type query can pull another file in.
    "noResolve": True, "skipLibCheck": True,
    # noResolve still resolves each import (it only leaves the file out), and a resolved one is
    # named in its error ("File '/tmp/…/jev.d.ts' is not a module", "'…/node_modules/x/index.js'
    # implicitly has an 'any' type") or, in JavaScript, is no error at all. No file ends in this
    # suffix, so every import is "Cannot find module 'x'": nothing of the host's files, not even
    # whether one exists, reaches a diagnostic. (The sandbox has no modules anyway.)
    "moduleSuffixes": [".jev-no-module"],
    "strict": True,
    # A caught value is `any`, as in JavaScript: `catch (e) { e.message }` is common and safe enough.
    "useUnknownInCatchVariables": False,
    "pretty": False, "noErrorTruncation": False,
}
OPTIONS: dict[Language, dict[str, Any]] = {
    Language.TYPESCRIPT: dict(_COMMON_OPTIONS),
    # JavaScript has no annotations to say what may be null or what `this` is: a parameter without
    # JSDoc is `any`, `x = null` does not make x null forever, a function may use `this`.
    Language.JAVASCRIPT: {**_COMMON_OPTIONS, "allowJs": True, "checkJs": True, "noImplicitAny": False,
                          "strictNullChecks": False, "noImplicitThis": False},
}
_PROGRAM_FILE = {Language.TYPESCRIPT: "program.ts", Language.JAVASCRIPT: "program.js"}


class CheckerUnavailable(JevError):
    """No compiler is installed; the message says what is missing and how to get it."""


class _LoopState:
    """Per event loop: the compiler slots (shared fairly between programs) and the compiles in
    flight, by digest."""

    def __init__(self) -> None:
        from .slots import FairSlots

        self.slots = FairSlots(MAX_COMPILERS)
        self.inflight: dict[str, anyio.Event] = {}


_STATE: RunVar[_LoopState] = RunVar("fabric_jev_typecheck")


def _state() -> _LoopState:
    try:
        return _STATE.get()
    except LookupError:
        state = _LoopState()
        _STATE.set(state)
        return state


def digest(program: Program, declarations: str, compiler: Compiler) -> str:
    """Everything a verdict depends on, hashed."""
    material = json.dumps([CHECKER_VERSION, compiler.version, {k.value: v for k, v in OPTIONS.items()},
                           declarations, program.language, program.code], ensure_ascii=False,
                          separators=(",", ":"))
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


class Reading(NamedTuple):
    """How the sandbox reads a program, and for TypeScript the erased code it runs (None: erasure
    refused the code, and the sandbox's own attempt will say why)."""

    language: Language
    erased: str | None = None


def declared(program: Program) -> Language | None:
    """The language the program says it is written in (a program file's suffix), if it says."""
    return None if program.language is None else Language(program.language)


def read(code: str, language: Language | None = None) -> Reading:
    """The declared `language`; without one, TypeScript when the code has TypeScript-only syntax,
    else JavaScript. TypeScript comes with its erased form when erasure accepts it.

    Blocking (a tree-sitter parse, capped): call it in a worker thread.
    """
    from .erasure import PARSE_CAP_S, strip_types

    if language is Language.JAVASCRIPT:
        return Reading(language)
    try:
        erased = strip_types(code)
    except TypeScriptError as exc:
        # Refused constructs (enum, namespace, ...) and syntax errors after TypeScript syntax are
        # TypeScript; code too slow to parse is left to the sandbox, which reads JavaScript first.
        too_slow = f"longer than {PARSE_CAP_S:g} s" in str(exc)
        return Reading(Language.JAVASCRIPT if too_slow and language is None else Language.TYPESCRIPT)
    if language is None and erased == code:
        return Reading(Language.JAVASCRIPT)
    return Reading(Language.TYPESCRIPT, erased)


def _tagged(name: str, tag: str) -> str:
    """`jev.d.ts` → `jev-TAG.d.ts`: the name a file gets for one compile (diagnostics.parse_output)."""
    stem, dot, suffix = name.partition(".")
    return f"{stem}-{tag}{dot}{suffix}"


class _Project(NamedTuple):
    folder: Path
    #: The files' names in this compile → the names diagnostics report.
    files: dict[str, str]


def _write_project(program: Program, declarations: str, reading: Reading | None) -> tuple[Reading, _Project]:
    """Read the code (when not yet read) and write the compiler's project into a new folder. Blocking."""
    import shutil
    import tempfile

    if reading is None:
        reading = read(program.code, declared(program))
    tag = secrets.token_hex(8)
    program_file = _tagged(_PROGRAM_FILE[reading.language], tag)
    declarations_file = _tagged(DECLARATIONS_FILE, tag)
    folder = Path(tempfile.mkdtemp(prefix="fabric-jev-tsc-"))
    try:
        (folder / declarations_file).write_text(declarations, encoding="utf-8", errors="surrogatepass")
        (folder / program_file).write_text(wrap(program.code, reading.language), encoding="utf-8",
                                           errors="surrogatepass")
        config = {"compilerOptions": OPTIONS[reading.language], "files": [declarations_file, program_file]}
        (folder / "tsconfig.json").write_text(json.dumps(config), encoding="utf-8")
        # The compiler reads the package.json nearest to each file (how to read it): this one, so it
        # never climbs to one above the temporary folder, which anyone may have put there.
        (folder / "package.json").write_text("{}\n", encoding="utf-8")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return reading, _Project(folder, {declarations_file: DECLARATIONS_FILE,
                                      program_file: _PROGRAM_FILE[reading.language]})


async def _compile(program: Program, declarations: str, reading: Reading | None, compiler: Compiler,
                   tc: TypecheckConfig) -> CompilerVerdict:
    """One compiler run on the program. Its blocking parts (the tree-sitter reading, the files) run
    in one worker thread before and one after."""
    import shutil

    from .diagnostics import parse_output, place
    from .tsgo import run_compiler  # a cache hit never loads the runner

    done, project = await anyio.to_thread.run_sync(_write_project, program, declarations, reading)
    folder = project.folder
    language = done.language
    try:
        run = await run_compiler(compiler, ["-p", "tsconfig.json", "--singleThreaded"], folder,
                                 timeout_s=tc.timeout_ms / 1000, memory_bytes=tc.memory_limit_bytes)
    except CompilerStopped as exc:
        exc.language = language
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(folder, ignore_errors=True))
    raw = parse_output(run.output, project.files)
    ours = _PROGRAM_FILE[language]
    foreign = [d for d in raw if d.error and d.file not in (ours, f"./{ours}")]
    if foreign:  # the declarations or the options: our fault, never the program's
        first = foreign[0]
        raise _stopped(language, clip_error(
            f"the type checker failed on its own declarations: {first.file or ''}({first.line},{first.column}): "
            f"{first.message} (TS{first.code})"))
    aliases = {"JevInput": schema_type(program.input_schema, "input"),
               "JevOutput": schema_type(program.output_schema, "output")}
    diagnostics = tuple(place(d, program.code, aliases) for d in raw if d.error)
    if run.returncode not in (0, 1, 2) or (run.returncode != 0 and not diagnostics):
        head = " ".join(run.output.split())[:300] or "no output"
        raise _stopped(language, f"the type checker failed (exit {run.returncode}): {head}")
    return CompilerVerdict(language, diagnostics, compiler.name, cut=run.cut, erased=done.erased)


def _stopped(language: Language | None, message: str) -> CompilerStopped:
    exc = CompilerStopped(message)
    exc.language = language
    return exc


def _from_disk(folder: Path, key: str, program: Program) -> CompilerVerdict | Stopped | None:
    """What the disk holds for `key`, its erased code checked against the source. Blocking.

    The sandbox runs a TypeScript verdict's erased code in place of the code, so it is never
    taken from the entry (a MAC proves who wrote it, not that it is right): the code is erased
    again here and the entry must agree, else it is a miss.
    """
    found = cache.read_disk(folder, key)
    if not isinstance(found, CompilerVerdict) or found.erased is None:
        return found
    fresh = read(program.code, declared(program))
    if fresh.erased != found.erased:
        return None
    return found


def _cache_folder(tc: TypecheckConfig) -> Path | None:
    if not tc.disk_cache:
        return None
    return Path(tc.cache_dir).expanduser() if tc.cache_dir else cache.default_folder()


def _stop_applies(found: Stopped, tc: TypecheckConfig) -> CompilerStopped | None:
    """The remembered stop as the error to raise, when the caps now are no larger than then."""
    if not found.covers(tc.timeout_ms, tc.memory_limit_bytes):
        return None
    return _stopped(found.language, found.remembered())


async def _cached(key: str, folder: Path | None, program: Program, tc: TypecheckConfig) -> CompilerVerdict | None:
    """The verdict for `key` from memory, else from disk (then remembered); None on a miss.
    Raises CompilerStopped at once for a program whose check a cap stopped under these caps."""
    found: CompilerVerdict | Stopped | None = cache.remembered(key) or cache.remembered_stop(key)
    if found is None and folder is not None:
        found = await anyio.to_thread.run_sync(_from_disk, folder, key, program)
        if found is not None:
            cache.remember(key, found)
    if isinstance(found, Stopped):
        stop = _stop_applies(found, tc)
        if stop is not None:
            raise stop
        return None
    return found


async def _verdict(program: Program, key: str, declarations: str, compiler: Compiler, tc: TypecheckConfig,
                   reading: Reading | None, *, disk_checked: bool = False) -> tuple[CompilerVerdict, bool]:
    """The verdict for a program (and whether it was cached), compiling only on a miss.

    `disk_checked`: the caller has just missed on disk for `key`, so it is not read again.
    """
    folder = _cache_folder(tc)
    state = _state()
    while True:
        found = cache.remembered(key)
        if found is not None:
            return found, True
        stop = cache.remembered_stop(key)
        if stop is not None and (raised := _stop_applies(stop, tc)) is not None:
            raise raised  # another launch's compile of it was just stopped by the same caps
        pending = state.inflight.get(key)
        if pending is None:
            break
        await pending.wait()  # the same program is being compiled for another launch
    done = state.inflight[key] = anyio.Event()
    try:
        if not disk_checked:
            found = await _cached(key, folder, program, tc)
            if found is not None:
                return found, True
        try:
            from .slots import slot_owner

            async with state.slots.taken(slot_owner(program.name)):
                verdict = await _compile(program, declarations, reading, compiler, tc)
        except CompilerStopped as exc:
            stopped = Stopped(str(exc), exc.language, tc.timeout_ms, tc.memory_limit_bytes)
            cache.remember(key, stopped)
            if folder is not None:
                await anyio.to_thread.run_sync(cache.write_disk, folder, key, stopped)
            raise
        cache.remember(key, verdict)
        if folder is not None:
            await anyio.to_thread.run_sync(cache.write_disk, folder, key, verdict)
        return verdict, False
    finally:
        del state.inflight[key]
        done.set()


async def check(program: Program, *, observed: bool = False, config: TypecheckConfig | None = None) -> CompilerVerdict:
    """The compiler's verdict on a program, whatever the host's modes.

    Raises `CheckerUnavailable` without a compiler and `CompilerStopped` when a cap stops it.
    """
    compiler = locate()
    if isinstance(compiler, Missing):
        raise CheckerUnavailable(compiler.reason)
    declarations = render(program, observed=observed)
    verdict, _ = await _verdict(program, digest(program, declarations, compiler), declarations, compiler,
                                config or TypecheckConfig(), None)
    return verdict


async def check_for_launch(program: Program, config: HostConfig, *, observed: bool) -> CheckReport:
    """Check a program about to launch, as the host's modes say; raise TypeScriptError to refuse it."""
    tc = config.typecheck
    if not tc.enabled:
        return CheckReport(None, CheckMode.OFF, TypeCheckOutcome.OFF)
    compiler = locate()
    declarations = render(program, observed=observed)
    reading: Reading | None = None
    key = ""  # the verdict's digest, once there is a compiler
    if isinstance(compiler, Compiler):
        key = digest(program, declarations, compiler)
        # The common relaunch finds its verdict in memory: no thread, no disk, no compiler. A new
        # process finds it on disk (JavaScript before the code is read, which loads the TypeScript
        # parser; TypeScript's erased code is made again and compared).
        try:
            found = await _cached(key, _cache_folder(tc), program, tc)
        except CompilerStopped as exc:
            return _stopped_report(exc, tc, declared(program), compiler)
        if found is not None:
            return _apply(CheckReport(found.language, tc.mode(found.language), TypeCheckOutcome.CLEAN,
                                      compiler.name, found, cached=True))
    language = declared(program)
    if language is not None and isinstance(compiler, Compiler):
        mode = tc.mode(language)  # known without reading the code (the compile reads it)
    elif tc.typescript is not tc.javascript or isinstance(compiler, Missing):
        reading = await anyio.to_thread.run_sync(read, program.code, language)
        mode = tc.mode(reading.language)
    else:
        mode = tc.typescript
    if reading is not None:
        language = reading.language
    if mode is CheckMode.OFF:
        return CheckReport(language, mode, TypeCheckOutcome.OFF)
    if isinstance(compiler, Missing):
        if tc.require_checker:
            raise TypeScriptError(f"Jev program cannot be type-checked: {compiler.reason} "
                                  "(typecheck.requireChecker is set)")
        return CheckReport(language, mode, TypeCheckOutcome.UNAVAILABLE, reason=compiler.reason,
                           erased=None if reading is None else reading.erased)
    try:
        verdict, cached = await _verdict(program, key, declarations, compiler, tc, reading, disk_checked=True)
    except CompilerStopped as exc:
        return _stopped_report(exc, tc, language, compiler)
    return _apply(CheckReport(verdict.language, tc.mode(verdict.language), TypeCheckOutcome.CLEAN,
                              compiler.name, verdict, cached=cached))


def _stopped_report(exc: CompilerStopped, tc: TypecheckConfig, language: Language | None,
                    compiler: Compiler) -> CheckReport:
    """A stopped check under the language's mode: refused under `error`, else run unchecked
    (the report's reason says why, and `warnings` says it before the run)."""
    language = exc.language or language
    mode = tc.mode(language) if language is not None else tc.typescript
    if mode is CheckMode.OFF:
        return CheckReport(language, mode, TypeCheckOutcome.OFF)
    if mode is CheckMode.ERROR:
        raise TypeScriptError(clip_error(f"Jev program could not be type-checked: {exc}")) from None
    return CheckReport(language, mode, TypeCheckOutcome.STOPPED, compiler.name, reason=str(exc))


def _apply(report: CheckReport) -> CheckReport:
    """The report's outcome under its mode; a refusal for errors under `error`."""
    verdict = report.verdict
    assert verdict is not None
    if report.mode is CheckMode.OFF:
        return CheckReport(report.language, report.mode, TypeCheckOutcome.OFF)
    if verdict.clean:
        outcome = TypeCheckOutcome.CLEAN
    elif report.mode is CheckMode.ERROR:
        raise TypeScriptError(clip_error(verdict.refusal()), diagnostics=verdict.diagnostics)
    else:
        outcome = TypeCheckOutcome.ERRORS
    return CheckReport(report.language, report.mode, outcome, report.compiler, verdict, cached=report.cached,
                       erased=verdict.erased)


def checker_status(config: HostConfig) -> CheckerStatus:
    """The host status's `typecheck`: the modes, and the compiler or why there is none."""
    tc = config.typecheck
    compiler = locate()
    if isinstance(compiler, Missing):
        return CheckerStatus(typescript=tc.typescript, javascript=tc.javascript, available=False,
                             reason=compiler.reason)
    return CheckerStatus(typescript=tc.typescript, javascript=tc.javascript, available=True, compiler=compiler.name)


async def check_result(program: Program, *, observed: bool = False,
                       config: TypecheckConfig | None = None) -> CheckResult:
    """`check` as `fabric-jev check --json` and the MCP tool jev_check report it.

    A check a cap stopped has the same keys, `clean: false` and no
    diagnostics, and `stopped` saying why; no compiler raises `CheckerUnavailable`.
    """
    try:
        verdict = await check(program, observed=observed, config=config)
    except CompilerStopped as exc:
        compiler = locate()
        return CheckResult(program.name, exc.language, compiler.name if isinstance(compiler, Compiler) else None,
                           clean=False, errors=0, cut=False, diagnostics=(), stopped=str(exc))
    return CheckResult(program.name, verdict.language, verdict.compiler, verdict.clean, len(verdict.diagnostics),
                       verdict.cut, verdict.diagnostics)
