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

  const LIMITS = { outputChars: 32768, emitChars: 4096, argsChars: 1048576, logChars: 4096, timers: 128 };

  let main = null;
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

  // " (line L, column C)" of the first stack frame inside the program's own
  // source, or "" when there is none (a thrown non-Error, a prelude error).
  function position(e) {
    let stack;
    try {
      if (!apply(hasInstance, ErrorCtor, [e])) return "";
      stack = e.stack;
    } catch (_) {
      return "";
    }
    if (typeof stack !== "string") return "";
    let at = 0;
    for (;;) {
      const found = apply(stringIndexOf, stack, ["<input>:", at]);
      if (found < 0) return "";
      let i = found + 8;
      let line = 0;
      let column = 0;
      let c;
      while ((c = apply(stringCharCodeAt, stack, [i])) >= 48 && c <= 57) { line = line * 10 + c - 48; i++; }
      if (c === 58) {
        i++;
        while ((c = apply(stringCharCodeAt, stack, [i])) >= 48 && c <= 57) { column = column * 10 + c - 48; i++; }
      }
      at = i;
      if (line > lineBase) return " (line " + (line - lineBase) + ", column " + column + ")";
    }
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
    if (finished) {
      return rejected(new ErrorCtor("Jev program has finished"));
    }
    let text;
    try {
      text = toText(args === undefined ? null : args, kind + " argument", maxChars);
    } catch (e) {
      return rejected(e);
    }
    const id = nextCallId++;
    calls += (calls ? "," : "") + "[" + id + "," + stringify(kind) + "," + text + "]";
    return new PromiseCtor(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
    });
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
        return rejected(new ErrorCtor("Invalid program.sleep duration"));
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
      else entry.reject(new ErrorCtor(c));
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
