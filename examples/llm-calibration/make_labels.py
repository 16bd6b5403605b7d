"""Writes labels.jsonl beside this file: the labeled set `learn --evaluator openai:MODEL` is shown on.

Three questions, one per type, 300 examples each, built from short templates with a fixed
seed (so the file is the same on every run). The labels are true by construction: a review
is positive because only positive phrases went into it, a message goes to Shipping because
it is about a parcel, and so on. Run: python examples/llm-calibration/make_labels.py
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

PER_TYPE = 300

PRODUCTS = ["kettle", "backpack", "phone case", "desk lamp", "blender", "jacket", "headset", "tent",
            "coffee grinder", "keyboard", "office chair", "water bottle", "toaster", "umbrella", "monitor",
            "running shoes", "vacuum cleaner", "bike lock", "yoga mat", "frying pan"]
GOOD = ["works perfectly", "is sturdy and well made", "arrived quickly and looks great", "exceeded my expectations",
        "is worth every penny", "is comfortable to use all day", "is the best I have owned", "does exactly what it says",
        "feels solid and reliable", "made my mornings easier", "is quiet and fast", "looks even better in person"]
BAD = ["broke after two days", "is flimsy and cheap", "arrived scratched and dented", "stopped working within a week",
       "is a waste of money", "is uncomfortable and badly designed", "is the worst I have owned", "does not do what it says",
       "feels fragile and unreliable", "made a terrible noise", "is slow and overheats", "looks nothing like the pictures"]
GOOD_END = ["I would buy it again.", "Highly recommended.", "Five stars.", "Very happy with it.", "Great purchase."]
BAD_END = ["I want a refund.", "Do not buy this.", "One star.", "Very disappointed.", "I regret buying it."]

DEPARTMENTS = {"Billing": "payments, invoices, charges and refunds",
               "Shipping": "deliveries, parcels, couriers and tracking",
               "Technical": "bugs, error messages, crashes and login problems"}
TOPICS = {
    "Billing": ["I was charged twice for my last order", "my invoice shows the wrong amount",
                "the refund you promised has not reached my card", "my credit card was billed after I cancelled",
                "I need a copy of my receipt for the payment", "the subscription fee went up without notice",
                "I paid but the order still says unpaid", "there is an unknown charge on my bank statement"],
    "Shipping": ["my parcel has not arrived yet", "the tracking number does not work",
                 "the courier left the package at the wrong address", "the delivery is three days late",
                 "the box arrived open and half empty", "I need to change the delivery address",
                 "the driver never came to deliver my order", "the shipment is stuck at the depot"],
    "Technical": ["the app crashes when I open settings", "I cannot log in to my account",
                  "the website shows error 500 when I check out", "the password reset link is broken",
                  "the page freezes after I upload a photo", "the app keeps logging me out",
                  "the search button does nothing", "I get a blank screen after the update"],
}
OPENERS = ["Hello,", "Hi there,", "Good morning,", "Hey,", "Dear support,", "Hi team,"]
CLOSERS = ["Thanks.", "Please help.", "Regards, Sam", "Thank you in advance.", "Best, Alex", "Cheers."]

LEVELS = ["Not urgent: no time pressure", "Somewhat urgent: should be handled within a day or two",
          "Very urgent: needs help right now"]
URGENCY = [
    ["whenever you have time", "no rush at all", "just a small question for later", "not important, just curious",
     "it can wait until next week", "only letting you know"],
    ["please look at it this week", "I would like an answer in the next day or two", "it is starting to be a problem",
     "please reply soon", "I need this sorted before Friday", "it is getting annoying"],
    ["URGENT: please help immediately", "this is an emergency, I need help right now",
     "ASAP, everything is blocked", "right now our whole shop is down", "critical: customers cannot pay at all",
     "help immediately, we are losing money every minute"],
]
SUBJECTS = ["my order", "our account", "the checkout", "the report", "my booking", "the export", "the dashboard",
            "my subscription"]


Example = tuple[str, dict[str, object], object]  # (state, question, label)


def distinct(prefix: str, make: Callable[[int], Example]) -> list[dict[str, object]]:
    """PER_TYPE examples from `make(i)` (i: how many are kept so far), a state drawn twice kept once."""
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    while len(out) < PER_TYPE:
        state, question, label = make(len(out))
        if state in seen:
            continue
        seen.add(state)
        out.append({"id": f"{prefix}-{len(out) + 1:03d}", "state": state, "question": question, "label": label})
    return out


def reviews(rng: random.Random) -> list[dict[str, object]]:
    def make(i: int) -> Example:
        positive = i % 2 == 0
        product = rng.choice(PRODUCTS)
        phrases = rng.sample(GOOD if positive else BAD, 2)
        state = (f"The {product} {phrases[0]} and {phrases[1]}. "
                 f"{rng.choice(GOOD_END if positive else BAD_END)}")
        return state, {"type": "noul", "instructions": "Is this customer review positive?"}, positive
    return distinct("review", make)


def routing(rng: random.Random) -> list[dict[str, object]]:
    names = list(DEPARTMENTS)

    def make(i: int) -> Example:
        department = names[i % 3]
        state = f"{rng.choice(OPENERS)} {rng.choice(TOPICS[department])}. {rng.choice(CLOSERS)}"
        return state, {"type": "choice", "instructions": "Which department should handle this message?",
                       "criteria": DEPARTMENTS}, department
    return distinct("route", make)


def urgency(rng: random.Random) -> list[dict[str, object]]:
    def make(i: int) -> Example:
        level = i % 3
        state = (f"{rng.choice(OPENERS)} I have a problem with {rng.choice(SUBJECTS)}; "
                 f"{rng.choice(URGENCY[level])}. {rng.choice(CLOSERS)}")
        return state, {"type": "score", "instructions": "How urgent is this message?", "criteria": LEVELS}, level
    return distinct("urgency", make)


def main() -> None:
    rng = random.Random(20261202)
    rows = reviews(rng) + routing(rng) + urgency(rng)
    path = Path(__file__).with_name("labels.jsonl")
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} examples to {path}")


if __name__ == "__main__":
    main()
