"""A small labelled set for the real-model tests and the benchmark: passages on distinct
topics, each with a question whose answer it holds (a question's label is its passage)."""

from __future__ import annotations

PASSAGES = {
    "refunds": "Refunds are paid back to the original card within 14 days of the return "
               "reaching our warehouse.",
    "shipping": "Parcels leave the Lisbon warehouse on weekdays; delivery in Europe takes "
                "two to four working days.",
    "warranty": "Every appliance carries a two-year warranty that covers manufacturing "
                "defects but not accidental damage.",
    "password": "To reset your password, open Settings, choose Security and follow the "
                "link we e-mail to you.",
    "invoice": "Invoices are issued as PDF files on the first day of each month and can be "
               "downloaded from the Billing page.",
    "battery": "The battery lasts about ten hours of video playback and charges fully in "
               "ninety minutes with the supplied adapter.",
    "cleaning": "Clean the filter under lukewarm running water once a month and let it dry "
                "completely before refitting it.",
    "opening": "Our shop in Porto opens at nine in the morning and closes at seven in the "
               "evening, Monday to Saturday.",
    "privacy": "We keep your personal data for as long as your account is open and delete "
               "it within thirty days after you close it.",
    "allergy": "The recipe contains peanuts and sesame, so it is not suitable for people "
               "with nut allergies.",
    "parking": "Visitors can park for free in the underground garage; take a ticket at the "
               "barrier and validate it at reception.",
    "vacation": "Employees receive twenty-five days of paid holiday per year, plus public "
                "holidays, booked through the HR portal.",
}
QUERIES = {
    "refunds": "How long until I get my money back after returning an item?",
    "shipping": "When will my parcel be delivered?",
    "warranty": "Is a broken appliance covered if it has a factory fault?",
    "password": "I forgot my password, what do I do?",
    "invoice": "Where can I download my monthly bill?",
    "battery": "How many hours does the battery last?",
    "cleaning": "How should I wash the filter?",
    "opening": "What time does the Porto store open?",
    "privacy": "How long do you store my personal information?",
    "allergy": "Can someone with a nut allergy eat this dish?",
    "parking": "Is there free parking for visitors?",
    "vacation": "How many days off do employees get each year?",
}


def markdown() -> str:
    """The passages as one Markdown document, one section per label."""
    return "\n\n".join(f"# {label.title()}\n\n{text}" for label, text in PASSAGES.items())
