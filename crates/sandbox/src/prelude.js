// Installs the sandbox globals (`tools`, `console`, seeded `Math.random`, pinned `Date`) and
// returns private helpers to the Rust side. Evaluated once per fresh context, before the user's
// script; the `natives` object never becomes reachable from user code.
(function (natives, maxCalls, nowMs) {
  "use strict";
  const g = globalThis;
  const issue = natives.issue;
  const emit = natives.log;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const PromiseCtor = Promise;
  const ProxyCtor = Proxy;
  const reject = (e) => PromiseCtor.reject(e);
  const construct = Reflect.construct;
  const defineProperty = Object.defineProperty;
  const pending = Object.create(null);

  const where = (key) => (key === "" ? "" : ` (at key "${key}")`);
  function strict(key, value) {
    switch (typeof value) {
      case "function":
        throw new TypeErrorCtor(`a function${where(key)} cannot be converted to JSON`);
      case "symbol":
        throw new TypeErrorCtor(`a symbol${where(key)} cannot be converted to JSON`);
      case "bigint":
        throw new TypeErrorCtor(`a BigInt${where(key)} cannot be converted to JSON`);
      default:
        return value;
    }
  }

  function toJson(value) {
    if (value === undefined) return "null";
    let text;
    try {
      text = stringify(value, strict);
    } catch (e) {
      throw new TypeErrorCtor(
        `the script's result cannot be converted to JSON: ${e && e.message !== undefined ? e.message : e}`
      );
    }
    return text === undefined ? "null" : text;
  }

  function call(path, args) {
    if (path === "") {
      return reject(new TypeErrorCtor("`tools` is not itself a tool; call e.g. tools.some.tool({...})"));
    }
    let json;
    try {
      json = args === undefined ? "{}" : stringify(args, strict);
    } catch (e) {
      return reject(
        new TypeErrorCtor(`arguments to tools.${path}() must be JSON: ${e && e.message !== undefined ? e.message : e}`)
      );
    }
    const seq = issue(path, json);
    if (seq < 0) {
      const e = new ErrorCtor(`tool call limit reached: a script may make at most ${maxCalls} tool calls`);
      e.code = "call_limit";
      e.data = null;
      return reject(e);
    }
    return new PromiseCtor((resolve, fail) => {
      pending[seq] = [resolve, fail];
    });
  }

  function deliver(seq, ok, payload, code, dataJson) {
    const p = pending[seq];
    delete pending[seq];
    if (p === undefined) return;
    if (ok) {
      p[0](parse(payload));
    } else {
      const e = new ErrorCtor(payload);
      e.code = code;
      e.data = dataJson == null ? null : parse(dataJson);
      p[1](e);
    }
  }

  // Keys that must not turn into tool paths: promise resolution probes `then`, JSON probes
  // `toJSON`, and string conversion probes `toString`/`valueOf`.
  const hidden = { __proto__: null, then: 1, toJSON: 1, valueOf: 1, constructor: 1, prototype: 1 };
  const target = () => {};
  function node(path) {
    const label = path === "" ? "[tools]" : `[tools.${path}]`;
    return new ProxyCtor(target, {
      get(_t, key) {
        if (typeof key !== "string") return undefined;
        if (key === "toString") return () => label;
        if (key in hidden) return undefined;
        return node(path === "" ? key : `${path}.${key}`);
      },
      apply(_t, _self, argv) {
        return call(path, argv[0]);
      },
      has: () => false,
      ownKeys: () => [],
      getOwnPropertyDescriptor: () => undefined,
      defineProperty: () => false,
      deleteProperty: () => true,
      set: () => false,
      getPrototypeOf: () => null,
      setPrototypeOf: () => false,
      preventExtensions: () => false,
      isExtensible: () => true,
    });
  }
  defineProperty(g, "tools", { value: node(""), writable: false, enumerable: false, configurable: false });

  function fmt(v) {
    switch (typeof v) {
      case "string":
        return v;
      case "function":
        return "[Function]";
      case "object":
        if (v === null) return "null";
        if (v instanceof ErrorCtor) {
          const head = `${v.name}: ${v.message}`;
          return v.stack ? `${head}\n${v.stack}` : head;
        }
        try {
          const s = stringify(v, (_k, x) => (typeof x === "bigint" ? `${x}n` : x));
          return s === undefined ? String(v) : s;
        } catch (e) {
          return "[unserializable object]";
        }
      case "bigint":
        return `${v}n`;
      default:
        return String(v);
    }
  }
  const logger = (level) =>
    function (...args) {
      let line = "";
      for (let i = 0; i < args.length; i++) {
        if (i > 0) line += " ";
        line += fmt(args[i]);
      }
      emit(level, line);
    };
  g.console = {
    log: logger("log"),
    info: logger("info"),
    warn: logger("warn"),
    error: logger("error"),
    debug: logger("debug"),
  };

  g.Math.random = natives.random;
  // A monotonic clock would make replays diverge; scripts have no use for one.
  delete g.performance;

  const RealDate = Date;
  function PinnedDate(...args) {
    if (new.target === undefined) return new RealDate(nowMs).toString();
    return construct(RealDate, args.length === 0 ? [nowMs] : args, new.target);
  }
  PinnedDate.prototype = RealDate.prototype;
  defineProperty(RealDate.prototype, "constructor", { value: PinnedDate, writable: true, configurable: true });
  defineProperty(PinnedDate, "name", { value: "Date" });
  PinnedDate.now = () => nowMs;
  PinnedDate.parse = RealDate.parse;
  PinnedDate.UTC = RealDate.UTC;
  g.Date = PinnedDate;

  return { deliver, toJson, fmt };
})
