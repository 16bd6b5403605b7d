// The guest API of a fabric-jev program, as TypeScript declarations.
//
// prelude.js, beside this file, installs what is declared here: `program`, `jev`, `tools`,
// `console`, the timers, and `input` when a program is loaded. QuickJS-ng itself adds
// `queueMicrotask`, `atob`, `btoa`, `performance`, `DOMException` and `InternalError`. The rest a
// program can reach is the ES2025 library (the compiler's own files): no DOM, no Node, no
// `fetch`. A test keeps this file, the prelude and the engine naming the same globals, and the
// same members of each object the prelude installs (tests/test_guest_api.py).
//
// A program is checked against this file followed by a few lines made from its own contract
// (`fabric-jev types PROGRAM` prints both):
//   type JevInput = ...;    the type of `input`, from inputSchema
//   type JevOutput = ...;   what the program returns, from outputSchema
//   interface JevTools extends JevToolsOf<"kv.get" | ...> {}   the refs of requires
//   interface Jev extends JevEvaluating {}   with "jev.evaluate" in requires (else `interface Jev {}`)
//   interface JevProgram extends JevProgramCore, JevObserving, JevAdvising {}
//     JevObserving in a run spawned with observe; JevAdvising with "jev.advise" in requires.

/** Any JSON value. */
type JevJson = null | boolean | number | string | JevJson[] | { [key: string]: JevJson };
/** What `state` and `instructions` may be: text, a list or an object. */
type JevText = string | object;

/** A choice among options: `criteria` maps each option key to its description (or null). */
interface JevChoiceQuestion {
  type: "choice";
  instructions: JevText;
  criteria: { readonly [option: string]: string | null };
}
/** A position on 2-10 ordered levels, described in order. */
interface JevScoreQuestion {
  type: "score";
  instructions: JevText;
  criteria: readonly string[];
}
/** The probability of yes; `criteria` may say what true and false mean. */
interface JevNoulQuestion {
  type: "noul";
  instructions: JevText;
  criteria?: { readonly true?: string | null; readonly false?: string | null };
}
type JevQuestion = JevChoiceQuestion | JevScoreQuestion | JevNoulQuestion;
type JevQuestions = { readonly [id: string]: JevQuestion };

interface JevChoiceAnswer<Option extends string = string> {
  type: "choice";
  /** One of the question's option keys. */
  choice: Option;
  probabilities: { [K in Option]: number };
  confidence: number;
}
interface JevScoreAnswer {
  type: "score";
  /** The probability-weighted level, from 0 to (levels - 1). */
  score: number;
  legend: { [level: string]: string };
  probabilities: { [level: string]: number };
  confidence: number;
}
/** A noul answer: `{type, noul}`. Its probability of yes is the field `noul` (there is no
 *  `probability`); a choice answer has `choice`, `probabilities` and `confidence`. */
interface JevNoulAnswer {
  type: "noul";
  /** The probability of yes, in [0, 1]: the noul answer's one field. */
  noul: number;
}
/** The answer to a question whose type is known only at run time: any of the three shapes, so
 *  every field is there to read (`type` says which are meant). */
interface JevAnyAnswer {
  type: JevQuestion["type"];
  choice: string;
  score: number;
  noul: number;
  legend: { [level: string]: string };
  probabilities: { [key: string]: number };
  confidence: number;
}
/** The answer to a question: its shape follows the question's type. A question whose type is not
 *  known before the call (built at run time) may have any of the three shapes. */
type JevAnswer<Q> = [JevQuestion] extends [Q] ? JevAnyAnswer
  : Q extends { type: "choice"; criteria: infer C } ? JevChoiceAnswer<keyof C & string>
  : Q extends { type: "score" } ? JevScoreAnswer
  : Q extends { type: "noul" } ? JevNoulAnswer
  : never;
interface JevEvaluation<Q> {
  /** One answer per question, keyed by the question's id. */
  answers: { [K in keyof Q]: JevAnswer<Q[K]> };
  usage: { input_tokens: number; output_tokens: number };
  model: string;
}

/** One event of the observed Main session (docs/observers.md). */
interface JevObservedEvent {
  id: string;
  sequence: number;
  event: "input" | "turn_end" | "tool_error" | "agent_end" | "agent_settled";
  source: "main";
  sessionId: string;
  revision: number;
  at: string;
  payload: {
    turnIndex: number;
    automatic?: boolean;
    inputText?: string;
    stopReason?: string | null;
    toolResultCount?: number;
    assistantText?: string[];
    toolResults?: { toolName: string; isError: boolean; text: string }[];
    toolName?: string | null;
    isError?: boolean;
  };
  /** The text was cut to the observer's maxChars. */
  truncated: boolean;
}
/** What became of a piece of advice. */
type JevAdviceResult = { delivered: true }
  | { delivered: false; reason: "disabled" | "stale" | "duplicate" | "budget" | "feedback" | "delivery_failed" };

/** What `program` has in every run. */
interface JevProgramCore {
  /** A cancellable wait: ms finite, from 0 to the run's timeout. */
  sleep(ms: number): Promise<null>;
  /** One progress event (at most 4,096 bytes of JSON). */
  emit(value: unknown): Promise<null>;
}
/** `program.nextEvent`: only in a run spawned with observe. */
interface JevObserving {
  /** The next observed Main-session event. */
  nextEvent(): Promise<JevObservedEvent>;
}
/** `program.advise`: only with "jev.advise" in requires. */
interface JevAdvising {
  /** Advice to the Main session about the last event taken. */
  advise(advice: { eventId: string; message: string }): Promise<JevAdviceResult>;
}
/** `jev.evaluate`: only with "jev.evaluate" in requires. */
interface JevEvaluating {
  /** Asks Jev a batch of typed questions about `state`. */
  evaluate<const Q extends JevQuestions>(request: { state: JevText; questions: Q; model?: string }): Promise<JevEvaluation<Q>>;
}
/** `tools`, over the refs a program requires (all but jev.advise, which is `program.advise`). */
interface JevToolsOf<Ref extends string> {
  /** Calls a capability listed in requires; host errors arrive as a thrown Error. */
  call(request: { ref: Ref; args?: unknown }): Promise<any>;
}

/** The program's input, checked against its inputSchema before the program starts. */
declare let input: JevInput;
declare const program: JevProgram;
declare const jev: Jev;
declare const tools: JevTools;

interface JevConsole {
  log(...values: unknown[]): void;
  info(...values: unknown[]): void;
  warn(...values: unknown[]): void;
  error(...values: unknown[]): void;
  debug(...values: unknown[]): void;
}
declare const console: JevConsole;
/** A guest timer (at most 128 pending); the id is for clearTimeout/clearInterval. */
declare function setTimeout(callback: (...args: any[]) => void, ms?: number, ...args: any[]): number;
declare function setInterval(callback: (...args: any[]) => void, ms?: number, ...args: any[]): number;
declare function clearTimeout(id?: number | null): void;
declare function clearInterval(id?: number | null): void;
declare function queueMicrotask(callback: () => void): void;
declare function atob(data: string): string;
declare function btoa(data: string): string;
declare const performance: { now(): number };
/** What atob and btoa throw on text they cannot read (`name` says why: "InvalidCharacterError"). */
interface DOMException extends Error {
  readonly code: number;
}
declare var DOMException: { new (message?: string, name?: string): DOMException; readonly prototype: DOMException };
/** The engine's own error, for a limit it hit: out of memory, too much recursion. */
interface InternalError extends Error {}
declare var InternalError: {
  new (message?: string): InternalError;
  (message?: string): InternalError;
  readonly prototype: InternalError;
};
