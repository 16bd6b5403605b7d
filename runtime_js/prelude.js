// The guest side of the bridge. Evaluated once per worker before any program
// code exists; it returns a single dispatcher function that only the worker's
// Python loop holds. Nothing here is reachable from guest code: the guest sees
// only the frozen `program`, `jev`, `tools`, `console` objects and the timer
// functions installed on globalThis.
//
// Every built-in we rely on is captured now, before guest code can patch
// prototypes or globals, and called through the captured `apply`; host-bound
// data is built as text (strings have no setters) with the captured
// JSON.stringify, so a guest that rewrites String.prototype.slice, JSON or
// Promise cannot change what the host receives.
(function () {
  "use strict";
  const G = globalThis;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const PromiseCtor = Promise;
  const promiseThen = Promise.prototype.then;
  const promiseReject = Promise.reject;
  const ErrorCtor = Error;
  const hasInstance = Function.prototype[Symbol.hasInstance];
  const apply = Reflect.apply;
  const freeze = Object.freeze;
  const defineProperty = Object.defineProperty;
  const create = Object.create;
  const StringCtor = String;
  const NumberCtor = Number;
  const numberIsFinite = Number.isFinite;
  const mathFloor = Math.floor;
  const mathMin = Math.min;
  // Concatenation can leave a "rope" string that cannot cross into Python;
  // slicing it yields a flat copy.
  const stringSlice = String.prototype.slice;
  const stringIndexOf = String.prototype.indexOf;
  const stringCharCodeAt = String.prototype.charCodeAt;
  const stringRepeat = String.prototype.repeat;
  const AsyncFunction = (async function () {}).constructor;
  const stringNormalize = String.prototype.normalize;
  const InternalErrorCtor = G.InternalError;
  const WeakSetCtor = WeakSet;
  const weakSetAdd = WeakSet.prototype.add;
  const weakSetHas = WeakSet.prototype.has;
  // The engine's own reading of an error's stack (an accessor on Error.prototype),
  // whatever the guest later assigns to `stack`.
  const stackAccessor = Object.getOwnPropertyDescriptor(ErrorCtor.prototype, "stack");
  const nativeStack = stackAccessor !== undefined && typeof stackAccessor.get === "function"
    ? stackAccessor.get : null;

  const LIMITS = { outputChars: 32768, emitChars: 4096, argsChars: 1048576, logChars: 4096, timers: 128 };

  let main = null;
  // The program's code, to turn the engine's byte columns into the author's.
  let source = "";
  // Lines the engine counts before the program's first line: the padding that
  // puts the program below every line of this prelude, plus the two lines of
  // the async function's header. Frames at or above it are the prelude's.
  let lineBase = 0;
  let nextCallId = 1;
  const pending = create(null);
  let calls = "";
  let logs = "";
  let timerReqs = "";
  let timerClears = "";
  let done = "null";
  let finished = false;
  let logUsed = 0;
  let logCut = false;
  const timers = create(null);
  let timerCount = 0;
  let nextTimerId = 1;
  let timerFault = null;
  let memoryLimit = "";  // " (the program's memory limit is N MiB)", set at load

  // Serialise a guest value for the host. Non-finite numbers and BigInt are
  // refused here, with the place named, rather than silently turned into null.
  function toText(value, what, maxChars) {
    if (value === undefined) {
      throw new ErrorCtor(what + " is undefined; use null for no value");
    }
    let text;
    try {
      text = stringify(value, function (key, v) {
        if (typeof v === "number" && !numberIsFinite(v)) {
          throw new ErrorCtor(what + " is not finite JSON (NaN or Infinity)");
        }
        return v;
      });
    } catch (e) {
      throw new ErrorCtor(what + " is not serialisable as JSON: " + describe(e));
    }
    if (text === undefined) {
      throw new ErrorCtor(what + " is not serialisable as JSON");
    }
    // UTF-8 never has fewer bytes than UTF-16 code units: this early refusal
    // only spares a large transfer; the host measures exact bytes.
    if (text.length > maxChars) {
      throw new ErrorCtor(what + " exceeds " + maxChars + " bytes");
    }
    return text;
  }

  function rejected(error) {
    return apply(promiseReject, PromiseCtor, [error]);
  }

  // Errors whose message already names the program's line and column (host-call errors).
  const located = new WeakSetCtor();

  // The engine's stack text of an error, read through the accessor captured above
  // (never through guest-reachable properties), or null.
  function rawStack(e) {
    try {
      if (!apply(hasInstance, ErrorCtor, [e])) return null;
      const stack = nativeStack !== null ? apply(nativeStack, e, []) : e.stack;
      return typeof stack === "string" ? stack : null;
    } catch (_) {
      return null;
    }
  }

  // One stack frame "    at f (<input>:L:C)": [L, C, index after C], or null when the
  // line names no place in the engine's single source.
  function frameAt(text, from) {
    const found = apply(stringIndexOf, text, ["<input>:", from]);
    if (found < 0) return null;
    let i = found + 8;
    let line = 0;
    let column = 0;
    let c;
    while ((c = apply(stringCharCodeAt, text, [i])) >= 48 && c <= 57) { line = line * 10 + c - 48; i++; }
    if (c === 58) {
      i++;
      while ((c = apply(stringCharCodeAt, text, [i])) >= 48 && c <= 57) { column = column * 10 + c - 48; i++; }
    }
    return [found, line, column, i];
  }

  // " (line L, column C)" of the first stack frame inside the program's own
  // source, or "" when there is none (a thrown non-Error, a prelude error, an
  // error whose message already says where).
  function position(e) {
    try {
      if (apply(weakSetHas, located, [e])) return "";
    } catch (_) {
      return "";
    }
    return framePosition(rawStack(e));
  }

  function framePosition(stack) {
    if (stack === null) return "";
    let at = 0;
    for (;;) {
      const frame = frameAt(stack, at);
      if (frame === null) return "";
      at = frame[3];
      if (frame[1] > lineBase) {
        return " (line " + (frame[1] - lineBase) + ", column " + column(frame[1] - lineBase, frame[2]) + ")";
      }
    }
  }

  // The engine counts columns in UTF-8 bytes; an editor counts characters (UTF-16
  // code units), which differ on a line with anything but ASCII before the place.
  function column(line, byteColumn) {
    let start = 0;
    for (let n = 1; n < line; n++) {
      start = apply(stringIndexOf, source, ["\n", start]) + 1;
      if (start === 0) return byteColumn;
    }
    let bytes = 0;
    let i = start;
    const end = source.length;
    while (bytes < byteColumn - 1 && i < end) {
      const c = apply(stringCharCodeAt, source, [i]);
      if (c === 10) break;
      if (c < 0x80) bytes += 1;
      else if (c < 0x800) bytes += 2;
      else if (c >= 0xd800 && c <= 0xdbff) { bytes += 4; i++; }
      else bytes += 3;
      i++;
    }
    return i - start + 1;
  }

  // The stack a guest reads: only the program's frames, numbered as in its own
  // source ("<program>:L:C"), and the built-ins it called. The prelude's frames
  // (the bridge, host-call plumbing) and the engine's pseudo-frames are left out.
  function programStack(stack) {
    if (stack === null) return stack;
    let out = "";
    let natives = "";
    let start = 0;
    const end = stack.length;
    while (start < end) {
      let stop = apply(stringIndexOf, stack, ["\n", start]);
      if (stop < 0) stop = end;
      const line = apply(stringSlice, stack, [start, stop]);
      start = stop + 1;
      const frame = frameAt(line, 0);
      if (frame !== null) {
        if (frame[1] > lineBase) {
          out += natives + apply(stringSlice, line, [0, frame[0]]) + "<program>:" + (frame[1] - lineBase) +
            ":" + column(frame[1] - lineBase, frame[2]) + apply(stringSlice, line, [frame[3]]) + "\n";
        }
        natives = "";
      } else if (apply(stringIndexOf, line, ["(native)"]) >= 0) {
        natives += line + "\n";  // kept only when the program called it: the next frame is the program's
      } else {
        natives = "";
      }
    }
    return out;
  }

  // Where a host call was made: the engine's stack at the call, read only if the call fails.
  function callSite() {
    try {
      return new ErrorCtor();
    } catch (_) {
      return null;
    }
  }

  // A host-call error: its message ends with the line and column of the call in the
  // program, and its stack is the call's, not the bridge's that settled it.
  function callError(message, site) {
    const stack = site === null ? null : rawStack(site);
    const e = new ErrorCtor(message + framePosition(stack));
    defineProperty(e, "stack", { value: programStack(stack) || "", writable: true, enumerable: false,
      configurable: true });
    apply(weakSetAdd, located, [e]);
    return e;
  }

  function describe(e) {
    try {
      if (apply(hasInstance, ErrorCtor, [e])) {
        const name = StringCtor(e.name);
        const message = StringCtor(e.message);
        return message ? name + ": " + message : name;
      }
      if (typeof e === "string") return e;
      const t = stringify(e);
      return t === undefined ? StringCtor(e) : t;
    } catch (_) {
      return "unprintable thrown value";
    }
  }

  function hostCall(kind, args, maxChars) {
    const site = callSite();
    if (finished) {
      return rejected(callError("Jev program has finished", site));
    }
    let text;
    try {
      text = toText(args === undefined ? null : args, kind + " argument", maxChars);
    } catch (e) {
      return rejected(callError(describeMessage(e), site));
    }
    const id = nextCallId++;
    calls += (calls ? "," : "") + "[" + id + "," + stringify(kind) + "," + text + "]";
    return new PromiseCtor(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject, site: site };
    });
  }

  function describeMessage(e) {
    try {
      if (apply(hasInstance, ErrorCtor, [e])) return StringCtor(e.message);
    } catch (_) {
      // fall through: described as a value
    }
    return describe(e);
  }

  function pushLog(level, args) {
    if (logCut) return;
    let line = level === "log" ? "" : "[" + level + "] ";
    for (let i = 0; i < args.length; i++) {
      const a = args[i];
      let piece;
      if (typeof a === "string") piece = a;
      else {
        try {
          piece = stringify(a);
          if (piece === undefined) piece = StringCtor(a);
        } catch (_) {
          piece = describe(a);
        }
      }
      line += (i ? " " : "") + piece;
    }
    const room = LIMITS.logChars - logUsed;
    if (line.length > room) {
      line = apply(stringSlice, line, [0, room]);
      logCut = true;
    }
    logUsed += line.length;
    logs += (logs ? "," : "") + stringify(line);
    if (logCut) logs += "," + stringify("[logs truncated]");
  }

  function addTimer(fn, ms, args, repeat) {
    if (typeof fn !== "function") throw new ErrorCtor("Timer callback must be a function");
    if (timerCount >= LIMITS.timers) throw new ErrorCtor("Guest pending timer limit exceeded");
    let delay = NumberCtor(ms);
    if (!(delay >= 0)) delay = 0;
    delay = mathMin(mathFloor(delay), 2147483647);
    const id = nextTimerId++;
    timers[id] = { fn: fn, args: args, repeat: repeat, delay: delay };
    timerCount++;
    timerReqs += (timerReqs ? "," : "") + "[" + id + "," + delay + "]";
    return id;
  }

  function clearTimer(id) {
    const key = NumberCtor(id);
    if (timers[key] !== undefined) {
      delete timers[key];
      timerCount--;
      timerClears += (timerClears ? "," : "") + key;
    }
  }

  function restArgs(argsObj, from) {
    const out = [];
    for (let i = from; i < argsObj.length; i++) defineProperty(out, i - from, { value: argsObj[i], writable: true, enumerable: true, configurable: true });
    return out;
  }

  function finish(ok, value) {
    if (finished) return;
    finished = true;
    let text;
    if (ok) {
      try {
        text = "[true," + toText(value, "output", LIMITS.outputChars) + "]";
      } catch (e) {
        text = "[false," + stringify(describe(e)) + "]";
      }
    } else {
      text = "[false," + stringify(describe(value) + position(value)) + "]";
    }
    done = text;
  }

  const program = freeze({
    sleep: function sleep(ms) {
      if (typeof ms !== "number" || !numberIsFinite(ms) || ms < 0) {
        return rejected(callError("Invalid program.sleep duration", callSite()));
      }
      return hostCall("sleep", ms, 64);
    },
    emit: function emit(value) { return hostCall("emit", value, LIMITS.emitChars); },
    nextEvent: function nextEvent() { return hostCall("nextEvent", null, 64); },
    advise: function advise(advice) { return hostCall("advise", advice, LIMITS.emitChars); },
  });
  const jev = freeze({
    evaluate: function evaluate(request) { return hostCall("evaluate", request, LIMITS.argsChars); },
  });
  const tools = freeze({
    call: function call(request) { return hostCall("tool", request, LIMITS.argsChars); },
  });
  const console = freeze({
    log: function log() { pushLog("log", arguments); },
    info: function info() { pushLog("info", arguments); },
    warn: function warn() { pushLog("warn", arguments); },
    error: function error() { pushLog("error", arguments); },
    debug: function debug() { pushLog("debug", arguments); },
  });

  function install(name, value) {
    defineProperty(G, name, { value: value, writable: false, enumerable: false, configurable: false });
  }
  // Error.prepareStackTrace would hand the guest call-site objects whose getFunction()
  // returns the prelude's own functions (the bridge among them): it stays unset for good.
  ErrorCtor.prepareStackTrace = undefined;
  defineProperty(ErrorCtor, "prepareStackTrace", { value: undefined, writable: false, enumerable: false,
    configurable: false });
  // What a guest reads as `error.stack`: its own frames only (programStack).
  if (nativeStack !== null) {
    const nativeSet = stackAccessor.set;
    defineProperty(ErrorCtor.prototype, "stack", {
      get: function stack() {
        const raw = rawStack(this);
        return raw === null ? undefined : programStack(raw);
      },
      set: function stack(value) { apply(nativeSet, this, [value]); },
      enumerable: false, configurable: false,
    });
  }
  install("program", program);
  install("jev", jev);
  install("tools", tools);
  install("console", console);
  install("setTimeout", function setTimeout(fn, ms) { return addTimer(fn, ms, restArgs(arguments, 2), false); });
  install("setInterval", function setInterval(fn, ms) { return addTimer(fn, ms, restArgs(arguments, 2), true); });
  install("clearTimeout", function clearTimeout(id) { clearTimer(id); });
  install("clearInterval", function clearInterval(id) { clearTimer(id); });

  // The engine's normalize can fail an allocation without raising anything: the
  // guest then catches an engine-internal value that prints as "[uninitialized]".
  // Give it the out-of-memory error the other built-ins throw. A method, so it is
  // no constructor, and named and sized like the built-in.
  defineProperty(StringCtor.prototype, "normalize", {
    value: ({
      normalize() {
        try {
          return apply(stringNormalize, this, arguments);
        } catch (e) {
          if (typeof e === "unknown") throw new InternalErrorCtor("out of memory" + memoryLimit);
          throw e;
        }
      },
    }).normalize,
    writable: true, enumerable: false, configurable: true,
  });

  // The worker's only handle on the guest.
  return function bridge(op, a, b, c, d) {
    if (op === "drain") {
      // "<1 if the program ended, else 0><timer changes for the worker, if any>\n<outbox for
      // the host, if any>": the worker reads the head and forwards the outbox untouched.
      const ended = done !== "null" || timerFault !== null;
      let out = ended ? "1" : "0";
      if (timerReqs || timerClears) out += '{"t":[' + timerReqs + '],"x":[' + timerClears + "]}";
      out += "\n";
      if (calls || logs || ended) {
        out += '{"c":[' + calls + '],"l":[' + logs + '],"d":' + done + ',"f":' +
          (timerFault === null ? "null" : stringify(timerFault)) + "}";
      }
      calls = ""; logs = ""; timerReqs = ""; timerClears = "";
      return apply(stringSlice, out, [0]);
    }
    if (op === "settle") {
      const entry = pending[a];
      if (entry === undefined) return;
      delete pending[a];
      if (b) entry.resolve(parse(c));
      else entry.reject(callError(c, entry.site));
      return;
    }
    if (op === "timer") {
      const t = timers[a];
      if (t === undefined || finished) return;
      if (t.repeat) timerReqs += (timerReqs ? "," : "") + "[" + a + "," + t.delay + "]";
      else { delete timers[a]; timerCount--; }
      try {
        apply(t.fn, undefined, t.args);
      } catch (e) {
        timerFault = "Uncaught exception in a timer callback: " + describe(e) + position(e);
      }
      return;
    }
    if (op === "load") {
      // Returns null, or the compile error with the program's line and column.
      lineBase = c + 2;
      if (typeof d === "number") memoryLimit = " (the program's memory limit is " + mathFloor(d / 1048576) + " MiB)";
      source = a;
      try {
        main = new AsyncFunction(apply(stringRepeat, "\n", [c]) + a);
      } catch (e) {
        return describe(e) + position(e);
      }
      const value = parse(b);
      defineProperty(G, "input", { value: value, writable: true, enumerable: false, configurable: true });
      return null;
    }
    if (op === "go") {
      let p;
      try {
        p = main();
      } catch (e) {
        finish(false, e);
        return;
      }
      apply(promiseThen, p, [function (v) { finish(true, v); }, function (e) { finish(false, e); }]);
      return;
    }
  };
})()
