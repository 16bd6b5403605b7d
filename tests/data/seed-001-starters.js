// The starter programs of seed 001 (the Jev skill), copied character for character from
// shared/seeds/001_1779e0079a4102a9.txt: the triage request and the argument of the
// verification-advisor's jev.spawn. tests/conftest.py's seed_starters evaluates this file in
// QuickJS: tests/test_examples.py checks that examples/ ships exactly these programs, inputs and
// observe options, and tests/test_observers.py runs the advisor as written here.
const request = {
  input: ["Please refund the duplicate charge.", "The app crashes when opening settings."],
  program: {
    name: "triage-tickets",
    inputSchema: { type: "array", maxItems: 20, items: { type: "string" } },
    outputSchema: {
      type: "array", maxItems: 20,
      items: {
        type: "object", additionalProperties: false,
        properties: {
          route: { enum: ["billing", "technical", "review"] },
          refundProbability: { type: "number", minimum: 0, maximum: 1 },
          urgency: { type: "number", minimum: 0, maximum: 2 },
        },
        required: ["route", "refundProbability", "urgency"],
      },
    },
    requires: ["jev.evaluate"],
    limits: { timeoutMs: 60000, maxEvaluations: 20, maxToolCalls: 100, maxTokens: 20000 },
    code: `
      const rows = [];
      for (const text of input) {
        const r = await jev.evaluate({
          state: { text },
          questions: {
            route: { type: "choice", instructions: "Which team handles the request in text?",
              criteria: { billing: "Invoices, charges, refunds", technical: "Broken software", other: "Neither team fits" } },
            refund: { type: "noul", instructions: "Does text explicitly request a refund?" },
            urgency: { type: "score", instructions: "How urgently does text describe needing help?",
              criteria: ["No time pressure stated", "A deadline is stated but not immediate", "Immediate help is explicitly needed"] },
          },
        });
        const a = r.answers;
        rows.push({
          route: a.route.confidence < 0.8 || a.route.choice === "other" ? "review" : a.route.choice,
          refundProbability: a.refund.noul,
          urgency: a.urgency.score,
        });
        await program.emit({ processed: rows.length });
        await program.sleep(25);
      }
      return rows;
    `,
  },
};
const observer = {
  input: null,
  observe: {
    events: ["turn_end"], include: ["assistantText", "toolResults"],
    maxChars: 4096, queueSize: 8,
    delivery: "steer", triggerTurn: false, maxAdvice: 2,
  },
  program: {
    name: "verification-advisor",
    inputSchema: {type:"null"}, outputSchema: {type:"null"},
    requires: ["jev.evaluate", "jev.advise"],
    limits: {timeoutMs:600000, maxEvaluations:40, maxToolCalls:200, maxTokens:20000},
    code: `
  for (let i = 0; i < 40; i++) {
    const event = await program.nextEvent();
    if (event.truncated) {
      await program.emit({eventId:event.id, review:"truncated context"});
      continue;
    }
    const result = await jev.evaluate({
      state: {turn:event.payload},
      questions: {
        contradiction: {
          type: "noul",
          instructions: "Does assistantText claim completion while toolResults explicitly show an unresolved relevant failed check? Missing context alone is not evidence of failure.",
        },
      },
    });
    const probability = result.answers.contradiction.noul;
    const advice = probability >= 0.9
      ? await program.advise({eventId:event.id, message:"Check the reported failing verification before claiming completion."})
      : null;
    await program.emit({eventId:event.id, probability, advice});
  }
  return null;
`,
  },
};
JSON.stringify({request, observer});
