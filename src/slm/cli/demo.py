"""``slm demo``: a short built-in conversation to store, and questions to ask of it."""

from __future__ import annotations

import shlex

import click

from slm.cli.base import Context, json_option
from slm.cli.output import emit, show_response
from slm.engine import MemoryInput

_CONVERSATION: tuple[tuple[str, str, str], ...] = (
    (
        "2024-03-02T09:15:00Z",
        "maya",
        "Maya: I finally signed the lease on a flat in Lisbon, I move in April.",
    ),
    ("2024-03-02T09:16:00Z", "sam", "Sam: Congrats! Is it the one near the Alfama tram stop?"),
    (
        "2024-03-02T09:17:00Z",
        "maya",
        "Maya: Yes, third floor, with a tiny balcony for my tomato plants.",
    ),
    (
        "2024-03-09T18:40:00Z",
        "sam",
        "Sam: My sister Priya is allergic to cats, so the kitten has to stay at my place.",
    ),
    (
        "2024-03-09T18:42:00Z",
        "maya",
        "Maya: Poor Pixel, he'll miss her. Remember he only eats the salmon kibble.",
    ),
    (
        "2024-04-14T11:05:00Z",
        "maya",
        "Maya: The move went fine, but the movers lost the box with my climbing gear.",
    ),
    (
        "2024-04-14T11:07:00Z",
        "sam",
        "Sam: Ugh. The bouldering gym in Marvila rents shoes and chalk if you need them.",
    ),
    (
        "2024-05-20T08:30:00Z",
        "sam",
        "Sam: I start the new job at the robotics lab on June 3rd, team lead is Dr. Okafor.",
    ),
    (
        "2024-05-20T08:32:00Z",
        "maya",
        "Maya: Amazing. Didn't you say the lab builds warehouse picking arms?",
    ),
    ("2024-05-20T08:33:00Z", "sam", "Sam: Right, and I'll own the grasp-planning software."),
    (
        "2024-06-30T20:10:00Z",
        "maya",
        "Maya: I'm training for the Lisbon half marathon in October, running 30 km a week.",
    ),
    (
        "2024-07-04T07:55:00Z",
        "sam",
        "Sam: Priya's wedding is on 21 September in Porto; you're invited!",
    ),
    (
        "2024-07-04T07:58:00Z",
        "maya",
        "Maya: I'll be there. I need to book a train from Lisbon to Porto.",
    ),
    (
        "2024-08-12T13:20:00Z",
        "maya",
        "Maya: Note to self: the landlord's name is Mr. Costa and rent is due on the 5th.",
    ),
)

QUESTIONS: tuple[str, ...] = (
    "Where does Maya live now?",
    "What does the cat eat?",
    "When does Sam start his new job and what will he work on?",
    "Whose wedding is coming up, and where is it?",
    "Who should Maya pay the rent to?",
    "What is the capital of Mongolia's tallest volcano?",
)


def conversation() -> list[MemoryInput]:
    return [
        MemoryInput(content=text, event_time=when, source=speaker, tags=("demo",))
        for when, speaker, text in _CONVERSATION
    ]


@click.command()
@json_option
@click.pass_context
def demo(ctx: click.Context, as_json: bool) -> None:
    """Store a short built-in conversation (profile 'demo') and show a few recalls."""
    obj: Context = ctx.obj
    if not obj.profile_flag:
        obj.profile = "demo"
    answers = []
    with obj.memory(calibrated=True) as memory:
        done = memory.store_many(conversation())
        new = sum(d.created for d in done)
        if not as_json:
            what = f"{len(done)} memories of a conversation between Maya and Sam"
            if new == len(done):
                click.echo(f"Stored {what}")
            else:
                click.echo(f"Stored {new} new of {what} (the rest were already there)")
            click.echo(f"in {memory.location} (profile {memory.profile!r}).\n")
        for question in QUESTIONS:
            response = memory.recall(question, k=3)
            answers.append(response.to_dict())
            if not as_json:
                click.echo(click.style(f"? {question}", bold=True))
                show_response(response)
                click.echo()
    if as_json:
        emit(answers)
        return
    where = "--dsn '<your DSN>' " if obj.dsn else ""
    where += f"--db {shlex.quote(obj.db)} " if obj.db else ""
    click.echo("Ask it something yourself:")
    click.echo(
        f"  slm {where}--profile {shlex.quote(obj.profile)} recall 'Where does Maya live now?'"
    )
