/* @program
{
  "name": "triage",
  "inputSchema": {
    "type": "object",
    "properties": {
      "text": {
        "type": "string",
        "maxLength": 2000
      }
    },
    "required": [
      "text"
    ],
    "additionalProperties": false
  },
  "outputSchema": {
    "type": "object",
    "additionalProperties": false,
    "required": [
      "route",
      "refund",
      "urgent",
      "urgency"
    ],
    "properties": {
      "route": {
        "enum": [
          "billing",
          "technical",
          "review"
        ]
      },
      "refund": {
        "type": "boolean"
      },
      "urgent": {
        "type": "boolean"
      },
      "urgency": {
        "type": "number",
        "minimum": 0,
        "maximum": 2
      }
    }
  },
  "requires": [
    "jev.evaluate"
  ],
  "limits": {
    "maxEvaluations": 1,
    "timeoutMs": 30000
  }
}
*/
// Wording A of the urgent question: what is happening now.
const { answers } = await jev.evaluate({
  state: input.text,
  questions: {
    route: {
      type: "choice",
      instructions: "Which team should handle this support ticket?",
      criteria: {
        billing: "Invoices, charges, payments, prices and refunds",
        technical: "Bugs, crashes, errors, outages and how-to questions about the product",
        other: "Neither team: feedback, praise, suggestions or account details",
      },
    },
    refund: { type: "noul", instructions: "Does the customer ask for money back?" },
    urgent: { type: "noul", instructions: "Does the customer need help right now, because something is down, blocked or harmful at this moment?" },
    urgency: {
      type: "score",
      instructions: "How soon does the customer need help?",
      criteria: ["No time pressure", "A deadline that is not immediate", "Help is needed right now"],
    },
  },
});
const route = answers.route;
return {
  // An unsure pick, or neither team, goes to a person.
  route: route.choice === "other" || route.confidence < 0.6 ? "review" : route.choice,
  refund: answers.refund.noul >= 0.5,
  urgent: answers.urgent.noul >= 0.5,
  urgency: answers.urgency.score,
};
