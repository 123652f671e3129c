# Bootstrap of the dsh-tools Python code runtime: runs one program in this CPython process.
#
# Protocol (newline-delimited JSON): frames to the host on fd 3, frames from the host on fd 4.
# The host sends one `run` frame ({program, namespaces, maxOutputBytes, maxDepth}); this side
# sends `call`, `log` and one `done`, and receives a `reply` per call. The program runs as the
# body of an async function whose parameters are the binding globals and the error classes.
# The host trusts nothing sent from here: it enforces every budget itself and kills this
# process tree when the run settles.

import ast
import asyncio
import builtins
import collections
import functools
import itertools
import json
import linecache
import math
import os
import signal
import sys
import threading
import traceback
import types
import _thread

TO_HOST = 3
FROM_HOST = 4
MAX_SAFE_INTEGER = 2**53 - 1

# Deep (but bounded) values go through the json module, which recurses per level.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))

_max_output_bytes = 64 * 1024 * 1024
_max_frame_bytes = 1024 * 1024
_max_depth = 4096
_finished = False
_send_lock = threading.Lock()


def _send(line):
    data = memoryview(line.encode("utf-8") + b"\n")
    with _send_lock:
        while data:
            data = data[os.write(TO_HOST, data):]


def _well_formed(text):
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


_ESCAPED_TWO = frozenset('"\\\b\f\n\r\t')


def _cap_text(text):
    """Cuts text whose JSON form is far over the output cap, keeping enough for the host to
    see that it is over and to keep the longest prefix that fits."""
    if len(text) * 6 + 2 <= _max_output_bytes:
        return text
    size = 2
    for i, c in enumerate(text):
        o = ord(c)
        if c in _ESCAPED_TWO:
            size += 2
        elif o < 0x20:
            size += 6
        else:
            size += 1 if o < 0x80 else 2 if o < 0x800 else 3 if o < 0x10000 else 4
        if size > _max_output_bytes + 2:
            return text[:i]
    return text


def _log(text):
    if not _finished:
        _send('{"type":"log","text":%s}' % json.dumps(_cap_text(_well_formed(str(text))), ensure_ascii=False))


class _LogStream:
    """Replaces sys.stdout and sys.stderr: each complete line becomes one log entry."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self):
        self._partial = []
        self._partial_len = 0
        # Reentrant: a signal handler may print while this thread writes.
        self._lock = threading.RLock()

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        with self._lock:
            lines = text.split("\n")
            if len(lines) > 1:
                first = "".join(self._partial) + lines[0]
                self._partial = [lines[-1]] if lines[-1] else []
                self._partial_len = len(lines[-1])
                complete = [first] + lines[1:-1]
            else:
                if text:
                    self._partial.append(text)
                    self._partial_len += len(text)
                complete = []
            # A line that can no longer fit the output cap goes to the host now, so that a
            # newline-free flood ends as output-limit instead of piling up here.
            if self._partial_len > _max_output_bytes:
                complete.append("".join(self._partial))
                self._partial = []
                self._partial_len = 0
            # Under the lock, so that one write's lines (a thread's report) stay together.
            for line in complete:
                _log(line)
        return len(text)

    def flush(self):
        pass

    def end(self):
        with self._lock:
            rest = "".join(self._partial)
            self._partial = []
            self._partial_len = 0
        if rest:
            _log(rest)

    def isatty(self):
        return False

    def writable(self):
        return True


class _Unfit(Exception):
    pass


def _encode(root):
    """Lossless JSON without recursion: dicts with str keys, lists and tuples, finite floats
    (not -0.0), integers within +-(2**53 - 1), well-formed str, bool and None, at most
    _max_depth levels deep."""
    out = []
    stack = []
    value = root
    while True:
        if value is None:
            out.append("null")
        elif value is True:
            out.append("true")
        elif value is False:
            out.append("false")
        elif type(value) is int:
            if abs(value) > MAX_SAFE_INTEGER:
                raise _Unfit("lossy")
            out.append(str(value))
        elif type(value) is float:
            if not math.isfinite(value) or (value == 0.0 and math.copysign(1.0, value) < 0):
                raise _Unfit("lossy")
            out.append(repr(value))
        elif type(value) is str:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise _Unfit("lossy") from None
            out.append(json.dumps(value, ensure_ascii=False))
        elif type(value) in (list, tuple, dict):
            if len(stack) >= _max_depth:
                raise _Unfit("deep")
            if type(value) is dict:
                out.append("{")
                stack.append([iter(value.items()), True, True])
            else:
                out.append("[")
                stack.append([iter(value), False, True])
        else:
            raise _Unfit("lossy")
        while True:
            if not stack:
                return "".join(out)
            top = stack[-1]
            items, is_dict, first = top
            try:
                item = next(items)
            except StopIteration:
                out.append("}" if is_dict else "]")
                stack.pop()
                continue
            if not first:
                out.append(",")
            top[2] = False
            if is_dict:
                key, value = item
                if type(key) is not str:
                    raise _Unfit("lossy")
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    raise _Unfit("lossy") from None
                out.append(json.dumps(key, ensure_ascii=False))
                out.append(":")
            else:
                value = item
            break


# Exceptions of a chain (and groups' members) a failure shows; CPython would print every one,
# and a program can chain millions.
_MAX_CHAINED = 64
# Exception groups are new in 3.11.
_GROUP = getattr(builtins, "BaseExceptionGroup", ())


def _bound_chain(exc, cut):
    # Cuts the links past the first `_MAX_CHAINED` exceptions, nearest first, for as long as the
    # failure is formatted; `cut` collects them, to be put back. An exception whose links cannot
    # be read (a property that raises) ends its branch.
    todo, seen = collections.deque([exc]), set()
    while todo:
        one = todo.popleft()
        if id(one) in seen:
            continue
        seen.add(id(one))
        try:
            cause, context, suppress = one.__cause__, one.__context__, one.__suppress_context__
            members = one.exceptions if isinstance(one, _GROUP) else ()
        except Exception:
            continue
        links = [link for link in (cause, context) if isinstance(link, BaseException)]
        if len(seen) >= _MAX_CHAINED and links:
            try:
                one.__cause__ = one.__context__ = None
            except Exception:
                continue
            cut.append((one, cause, context, suppress))
            continue
        todo.extend(links)
        if isinstance(members, tuple):
            todo.extend(member for member in members if isinstance(member, BaseException))


def _describe(exc):
    cut = []
    try:
        _bound_chain(exc, cut)
        summary = traceback.TracebackException.from_exception(exc)
        # Keep the program's own frames, in every exception of the chain or group: the
        # bootstrap's and the standard library's are noise, and name host paths.
        todo, seen = [summary], set()
        while todo:
            one = todo.pop()
            if one is None or id(one) in seen:
                continue
            seen.add(id(one))
            one.stack = traceback.StackSummary.from_list(
                [frame for frame in one.stack if frame.filename == "program.py"]
            )
            todo.extend((one.__cause__, one.__context__))
            todo.extend(getattr(one, "exceptions", None) or ())
        text = "".join(summary.format()).rstrip("\n")
        return text + "\n(further chained exceptions not shown)" if cut else text
    except BaseException:
        try:
            return repr(exc)
        except BaseException:
            return "program raised an unrenderable value"
    finally:
        for one, cause, context, suppress in cut:
            try:
                one.__cause__, one.__context__ = cause, context
                one.__suppress_context__ = suppress
            except Exception:
                pass


def _report_loop_error(loop, context):
    # asyncio's own report of an error nothing awaits (a callback's, a task's never retrieved)
    # would show the event loop's frames and the host's paths; a callback's repr names where
    # its function is defined, a library's file for one such as `json.loads`.
    text = str(context.get("message") or "Unhandled exception in event loop")
    if "handle" in context and text.startswith("Exception in callback "):
        text = "Exception in callback"
    exc = context.get("exception")
    if isinstance(exc, BaseException):
        text += "\n" + _describe(exc)
    print(text, file=sys.stderr)


def _finish(frame):
    global _finished
    if not _finished:
        _finished = True
        _send(frame)


def _fail(kind, message):
    _finish(
        '{"type":"done","error":{"kind":"%s","message":%s}}'
        % (kind, json.dumps(_cap_text(_well_formed(message)), ensure_ascii=False))
    )


def _complete(value):
    if value is None:
        _finish('{"type":"done"}')
        return
    try:
        text = _encode(value)
    except _Unfit as e:
        if str(e) == "deep":
            _fail("invalid-output", "program completion nests deeper than %d levels" % _max_depth)
        else:
            _fail("invalid-output", "program completion must be lossless JSON")
        return
    except Exception:
        _fail("invalid-output", "program completion must be lossless JSON")
        return
    _finish('{"type":"done","value":%s}' % text)


class _Namespace:
    """A binding global: `ns.name(args)` and `ns["any-name"](args)` reach own bindings only."""

    __slots__ = ("_dsh_functions",)

    def __init__(self, functions):
        object.__setattr__(self, "_dsh_functions", functions)

    def __getattr__(self, name):
        try:
            return self._dsh_functions[name]
        except KeyError:
            raise AttributeError("no binding named %r" % name) from None

    def __getitem__(self, name):
        try:
            return self._dsh_functions[name]
        except (KeyError, TypeError):
            raise KeyError(name) from None

    def __setattr__(self, name, value):
        raise AttributeError("bindings are read-only")

    def __dir__(self):
        return list(self._dsh_functions)


_pending = {}
_next_id = 0
_MISSING = object()


def _error_class(name, member):
    return type(name, (Exception,), {"__module__": "builtins", "__annotations__": {member: str}})


def _raiser(cls, member):
    def make(binding, message, code=None):
        if cls is None:
            return Exception(message)
        error = cls(message)
        setattr(error, member, binding)
        error.code = code if isinstance(code, str) else None
        return error

    return make


def _binding(loop, global_name, name, make_error):
    async def call(args=_MISSING, /, **keywords):
        global _next_id
        # Keyword arguments are the arguments object (`tools.f(path="a")` sends
        # `{"path": "a"}`, `tools.f()` sends `{}`); a call passes them or one value, not both.
        if args is _MISSING:
            args = keywords
        elif keywords:
            raise make_error(name, "pass the arguments as keywords or as one dict, not both")
        try:
            text = _encode(args)
        except Exception:
            raise make_error(name, "binding arguments must be lossless JSON") from None
        _next_id += 1
        call_id = _next_id
        frame = '{"type":"call","id":%d,"global":%s,"name":%s,"args":%s}' % (
            call_id,
            json.dumps(global_name),
            json.dumps(name),
            text,
        )
        if len(frame.encode("utf-8")) > _max_frame_bytes:
            raise make_error(name, "binding arguments exceed %d bytes" % _max_frame_bytes)
        future = loop.create_future()
        _pending[call_id] = (future, name, make_error)
        _send(frame)
        return await future

    call.__name__ = call.__qualname__ = "binding"
    return call


def _on_reply(frame):
    waiter = _pending.pop(frame.get("id"), None)
    if waiter is None:
        return
    future, name, make_error = waiter
    if future.done():
        return
    if frame.get("ok"):
        future.set_result(frame.get("value"))
    else:
        future.set_exception(make_error(name, str(frame.get("message")), frame.get("code")))


def _compile(program, params):
    tree = ast.parse(program, filename="program.py", mode="exec")
    arguments = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=p) for p in params],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=[],
    )
    main = ast.AsyncFunctionDef(
        name="__dsh_main__",
        args=arguments,
        body=tree.body or [ast.Pass(lineno=1, col_offset=0)],
        decorator_list=[],
        returns=None,
        type_comment=None,
        lineno=1,
        col_offset=0,
    )
    if "type_params" in ast.AsyncFunctionDef._fields:
        main.type_params = []
    module = ast.Module(body=[main], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, "program.py", "exec")
    # Lets tracebacks quote the program's lines.
    linecache.cache["program.py"] = (len(program), None, program.splitlines(True), "program.py")
    scope = {"__name__": "__dsh_program__", "__builtins__": builtins}
    exec(code, scope)
    return scope["__dsh_main__"]


_STUCK = (
    "the program waits for a future that nothing can complete: "
    "no tool call, timer, task, thread or I/O is pending"
)


def _signal_handlers():
    return [signal.getsignal(number) for number in sorted(signal.valid_signals())]


# Threads started but not yet running Python code, which no count of the interpreter sees, and
# a count of every start (read by advancing it): a thread may start the next and end between
# two reads of the others.
_threads_starting = set()
_thread_starts = itertools.count()


def _runner(token, function):
    def run(*args, **kwargs):
        _threads_starting.discard(token)
        return function(*args, **kwargs)

    run.runs = function
    return run


_RUNNER = _runner(None, None).__code__


def _count_thread_starts():
    start = _thread.start_new_thread

    def start_new_thread(*call, **keywords):
        # Anything but (function, args[, kwargs]) gets the interpreter's own error.
        if keywords or not 2 <= len(call) <= 3 or not callable(call[0]):
            return start(*call, **keywords)
        token = object()
        next(_thread_starts)
        _threads_starting.add(token)
        try:
            return start(_runner(token, call[0]), *call[1:])
        except BaseException:
            _threads_starting.discard(token)
            raise

    _thread.start_new_thread = _thread.start_new = threading._start_new_thread = start_new_thread


def _report_thread_error(args):
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    print("Exception in thread %s:\n%s" % (name, _describe(args.exc_value)), file=sys.stderr)


def _report_unraisable(unraisable):
    text = unraisable.err_msg or "Exception ignored in"
    shown = unraisable.object
    if isinstance(shown, types.FunctionType) and shown.__code__ is _RUNNER:
        shown = shown.runs
    if shown is not None:
        try:
            text += ": %r" % (shown,)
        except BaseException:
            pass
    if unraisable.exc_value is not None:
        text += "\n" + _describe(unraisable.exc_value)
    print(text, file=sys.stderr)


def _detect_stuck_waits(loop):
    # The event loop asks its selector to wait with no timeout only when nothing is ready and
    # nothing is scheduled. If then no call waits for its reply and no descriptor, thread or
    # signal handler but this bootstrap's own could wake the loop, the program can never go on:
    # it fails now instead of at the wall-clock ceiling. Anything unusual keeps the plain wait.
    selector = loop._selector
    select = selector.select
    own = {FROM_HOST, loop._ssock.fileno()}
    handlers = _signal_handlers()

    def stuck():
        # The order matters: each count sees what the one before it may have missed.
        starts = next(_thread_starts)
        return (
            not _finished
            and not _pending
            and not _threads_starting
            and threading.active_count() == 1
            # Also a thread that left `threading` but still runs code (thread-local destructors).
            and len(sys._current_frames()) == 1
            # Checked after the threads: one that just ended may have queued a callback.
            and not loop._ready
            and not getattr(loop, "_signal_handlers", True)
            and _signal_handlers() == handlers
            and {key.fd for key in selector.get_map().values()} <= own
            and next(_thread_starts) == starts + 1
        )

    def watched(timeout=None):
        if timeout is None and stuck():
            # A wake-up written just before the check (a thread's `call_soon_threadsafe`).
            events = select(0)
            if events:
                return events
            _fail("exception", _STUCK)
        return select(timeout)

    selector.select = watched


async def _read_frames(reader, on_frame):
    while True:
        line = await reader.readline()
        if not line:
            return
        on_frame(json.loads(line))


async def _main():
    global _max_output_bytes, _max_frame_bytes, _max_depth
    loop = asyncio.get_running_loop()
    # Also what a handler of the program's own, or none, falls back on.
    loop.default_exception_handler = functools.partial(_report_loop_error, loop)
    reader = asyncio.StreamReader(limit=sys.maxsize)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(FROM_HOST, "rb", buffering=0)
    )
    run = json.loads(await reader.readline())
    _max_output_bytes = run["maxOutputBytes"]
    _max_frame_bytes = run["maxFrameBytes"]
    _max_depth = run["maxDepth"]
    params, values, classes = [], [], []
    for spec in run["namespaces"]:
        descriptor = spec.get("errorClass")
        cls = _error_class(descriptor["name"], descriptor["member"]) if descriptor else None
        make_error = _raiser(cls, descriptor["member"] if descriptor else None)
        functions = {name: _binding(loop, spec["global"], name, make_error) for name in spec["names"]}
        params.append(spec["global"])
        values.append(_Namespace(functions))
        if cls is not None:
            classes.append((descriptor["name"], cls))
    for name, cls in classes:
        params.append(name)
        values.append(cls)
    replies = asyncio.ensure_future(_read_frames(reader, lambda f: f.get("type") == "reply" and _on_reply(f)))
    streams = (sys.stdout, sys.stderr)
    try:
        main = _compile(run["program"], params)
        try:
            _detect_stuck_waits(loop)
        except AttributeError:
            pass
        result = await main(*values)
    except BaseException as exc:
        for stream in streams:
            stream.end()
        _fail("exception", _describe(exc))
    else:
        for stream in streams:
            stream.end()
        _complete(result)
    # The host ends this process; until then, keep serving nothing.
    await replies
    await asyncio.Event().wait()


sys.stdout = _LogStream()
sys.stderr = _LogStream()
_count_thread_starts()
# Like asyncio's reports, the default ones would show the host's frames and paths.
threading.excepthook = _report_thread_error
sys.unraisablehook = _report_unraisable
sys.excepthook = lambda kind, value, trace: print(_describe(value), file=sys.stderr)
# Out-of-memory errors are the program's exceptions like any other; only the host's own
# measurement of resident memory ends a run as memory-limit.
asyncio.run(_main())
