"""A deterministic generator of personal-assistant histories with facts that change
(``slm bench lifecycle``; measured in ``slm_bench.lifecycle``).

A history is what an assistant would have been told over a few years about its user
(first person: "I moved to Porto") and two to four people around them ("Ana moved to
Porto"): where they live, where and as what they work, a favourite food, the car they
drive, their rent, their diet, the seats they prefer. Each fact takes two to five values
over months or years, and each value is stated in one of several phrasings, some sharing
words with the question and the earlier statement ("moved to", "works at"), some not
("packed up and now calls Porto home", "accepted an offer from Globex"): some phrasings
are ones slm's fact reader does not recognise, on purpose, so the benchmark measures what
an agent would meet. Between them, distractor notes share the facts' words (a city visited,
a colleague's company, a restaurant) without stating a new value. A history has 20 to 200
notes.

Questions, three kinds: the current value ("Where does Ana live?"), the value at a past
date (once as ``as_of`` with the current-value question, once in words: "Where did Ana
live in March 2023?") and the change ("When did Ana move to Porto?"). The expected answer
of each is the one note that states the value asked about.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

CITIES = (
    "Lisbon Porto Berlin Munich Madrid Seville Paris Lyon Amsterdam Rotterdam Vienna Prague "
    "Warsaw Krakow Dublin Cork Edinburgh Glasgow Oslo Bergen Stockholm Gothenburg Copenhagen "
    "Helsinki Zurich Geneva Milan Turin Brussels Ghent"
).split()
COMPANIES = (
    "Initech|Globex|Hooli|Umbrella Labs|Stark Analytics|Wayne Logistics|Acme Robotics|"
    "Cyberdyne|Soylent Foods|Vandelay Imports|Pied Piper|Aperture Science|Tyrell Systems|"
    "Oscorp|Monarch Travel|Nakatomi Trading|Dunder Mifflin|Blue Sun|Massive Dynamic|Wonka Labs"
).split("|")
TITLES = (
    "data analyst|software engineer|product manager|nurse|teacher|architect|accountant|"
    "designer|project lead|sales manager|chef|pharmacist"
).split("|")
FOODS = "ramen sushi paella lasagne tacos pho curry risotto falafel dumplings".split()
CARS = (
    "Toyota Corolla|Honda Civic|Volkswagen Golf|Tesla Model 3|Skoda Octavia|Ford Focus|"
    "Renault Clio|Mazda 3|Volvo V60|Kia Niro"
).split("|")
DIETS = "vegetarian vegan pescatarian keto".split()
SEATS = "window aisle front-row exit-row".split()
NAMES = (
    "Ana Jordan Priya Tomas Mei Lukas Sofia Omar Elena Kenji Amara Felix Ines Ravi Clara "
    "Mateo Yara Nils Leila Bruno"
).split()
MONTHS = (
    "January February March April May June July August September October November December"
).split()

#: Per attribute: its values, then (first person, third person) phrasings of a first
#: statement, of a change, and the questions: current value, value at a past date (in
#: words), the change. ``{v}`` is the value, ``{n}`` the person, ``{V}`` the value
#: capitalised, ``{when}`` a month and year.
Say = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Attribute:
    values: tuple[str, ...]
    first: tuple[Say, ...]
    change: tuple[Say, ...]
    current: tuple[Say, ...]
    past: tuple[Say, ...]
    when: tuple[Say, ...]


ATTRIBUTES: dict[str, Attribute] = {
    "residence": Attribute(
        values=tuple(CITIES),
        first=(
            ("I live in {v}.", "{n} lives in {v}."),
            ("I'm based in {v} these days.", "{n} is based in {v} these days."),
            ("Home for me is {v}.", "Home for {n} is {v}."),
        ),
        change=(
            ("I moved to {v} last month.", "{n} moved to {v} last month."),
            ("Big news: we relocated to {v}!", "{n} relocated to {v} for a fresh start."),
            ("My new apartment is in {v}.", "{n}'s new apartment is in {v}."),
            ("I packed up and now call {v} home.", "{n} packed up and now calls {v} home."),
            ("Finally settled in {v} after the move.", "{n} finally settled in {v}."),
        ),
        current=(
            ("Where do I live?", "Where does {n} live?"),
            ("Which city am I living in now?", "Which city is {n} living in now?"),
        ),
        past=(("Where did I live in {when}?", "Where did {n} live in {when}?"),),
        when=(("When did I move to {v}?", "When did {n} move to {v}?"),),
    ),
    "employer": Attribute(
        values=tuple(COMPANIES),
        first=(
            ("I work at {v}.", "{n} works at {v}."),
            ("I've been working for {v} for a while.", "{n} has been working for {v}."),
        ),
        change=(
            ("I just joined {v}.", "{n} just joined {v}."),
            ("I accepted an offer from {v} and start Monday.", "{n} accepted an offer from {v}."),
            ("Started my new job at {v} today.", "{n} started a new job at {v}."),
            ("I left my old company; these days I'm at {v}.", "{n} is at {v} now."),
        ),
        current=(
            ("Where do I work?", "Where does {n} work?"),
            ("Which company am I employed by?", "Which company employs {n}?"),
        ),
        past=(("Where did I work in {when}?", "Where did {n} work in {when}?"),),
        when=(("When did I join {v}?", "When did {n} join {v}?"),),
    ),
    "job title": Attribute(
        values=tuple(TITLES),
        first=(("I work as a {v}.", "{n} works as a {v}."),),
        change=(
            ("I got promoted to {v}.", "{n} got promoted to {v}."),
            ("I'm now working as a {v}.", "{n} is now working as a {v}."),
            ("New role for me: {v}.", "New role for {n}: {v}."),
        ),
        current=(
            ("What is my job title?", "What is {n}'s job title?"),
            ("What do I do for a living?", "What does {n} do for a living?"),
        ),
        past=(("What was my job in {when}?", "What was {n}'s job in {when}?"),),
        when=(("When did I become a {v}?", "When did {n} become a {v}?"),),
    ),
    "favourite food": Attribute(
        values=tuple(FOODS),
        first=(("My favourite food is {v}.", "{n}'s favourite food is {v}."),),
        change=(
            ("{V} is my new favourite food.", "{V} is {n}'s new favourite food."),
            ("These days my favourite food is {v}.", "These days {n}'s favourite food is {v}."),
            ("Can't get enough of {v} lately, it beats everything.", "{n} raves about {v}."),
        ),
        current=(("What is my favourite food?", "What is {n}'s favourite food?"),),
        past=(
            ("What was my favourite food in {when}?", "What was {n}'s favourite food in {when}?"),
        ),
        when=(("When did {v} become my favourite food?", "When did {v} become {n}'s favourite?"),),
    ),
    "car": Attribute(
        values=tuple(CARS),
        first=(("I drive a {v}.", "{n} drives a {v}."),),
        change=(
            ("I bought a {v} last weekend.", "{n} bought a {v} last weekend."),
            ("Traded in the old car; I've got a {v} now.", "{n} traded the old car for a {v}."),
            ("My car is now a {v}.", "{n}'s car is now a {v}."),
        ),
        current=(("What car do I drive?", "What car does {n} drive?"),),
        past=(("What car did I drive in {when}?", "What car did {n} drive in {when}?"),),
        when=(("When did I get the {v}?", "When did {n} get the {v}?"),),
    ),
    "rent": Attribute(
        values=tuple(f"{amount:,} euros" for amount in range(700, 2600, 50)),
        first=(("My rent is {v} a month.", "{n}'s rent is {v} a month."),),
        change=(
            ("My rent went up to {v}.", "{n}'s rent went up to {v}."),
            ("The landlord raised it again; I now pay {v} a month.", "{n} now pays {v} rent."),
        ),
        current=(("How much is my rent?", "How much rent does {n} pay?"),),
        past=(("How much was my rent in {when}?", "How much was {n}'s rent in {when}?"),),
        when=(("When did my rent change to {v}?", "When did {n}'s rent change to {v}?"),),
    ),
    "diet": Attribute(
        values=tuple(DIETS),
        first=(("I'm {v}.", "{n} is {v}."),),
        change=(
            ("I've gone {v}.", "{n} has gone {v}."),
            ("I switched to a {v} diet.", "{n} switched to a {v} diet."),
        ),
        current=(("What diet do I follow?", "What diet does {n} follow?"),),
        past=(("What diet did I follow in {when}?", "What diet did {n} follow in {when}?"),),
        when=(("When did I go {v}?", "When did {n} go {v}?"),),
    ),
    "seats": Attribute(
        values=tuple(SEATS),
        first=(("I prefer {v} seats on flights.", "{n} prefers {v} seats on flights."),),
        change=(
            ("I'd rather have {v} seats from now on.", "{n} would rather have {v} seats now."),
            ("Book me {v} seats going forward.", "Book {n} {v} seats going forward."),
        ),
        current=(("Which seats do I prefer on flights?", "Which seats does {n} prefer?"),),
        past=(("Which seats did I prefer in {when}?", "Which seats did {n} prefer in {when}?"),),
        when=(("When did I start preferring {v} seats?", "When did {n} switch to {v} seats?"),),
    ),
}

#: A second set of phrasings and questions, written after the first and kept out of the
#: development of slm's fact reader: ``--phrasings heldout`` measures how the lifecycle
#: features carry over to wording they were not tuned on.
HELDOUT: dict[str, Attribute] = {
    "residence": Attribute(
        values=tuple(CITIES),
        first=(
            ("These days I'm living in {v}.", "{n} has a place in {v}."),
            ("I rent a flat in {v}.", "{n} rents a flat in {v}."),
        ),
        change=(
            (
                "We just finished moving into our new place in {v}.",
                "{n} has just moved into a new place in {v}.",
            ),
            ("Goodbye old city, hello {v}!", "{n} left for {v} and isn't coming back."),
            ("I've relocated to {v} for good.", "{n} is living in {v} now."),
            ("The move to {v} is done.", "{n}'s move to {v} is done."),
        ),
        current=(
            ("What city do I live in?", "What city does {n} live in?"),
            ("Where is my home?", "Where is {n}'s home these days?"),
        ),
        past=(
            (
                "Which city was I living in during {when}?",
                "Which city was {n} living in during {when}?",
            ),
        ),
        when=(("When did I relocate to {v}?", "When did {n} relocate to {v}?"),),
    ),
    "employer": Attribute(
        values=tuple(COMPANIES),
        first=(
            ("I'm employed at {v}.", "{n} is employed at {v}."),
            ("My employer is {v}.", "{n}'s employer is {v}."),
        ),
        change=(
            ("Today was my first day at {v}.", "Today was {n}'s first day at {v}."),
            ("I signed a contract with {v}.", "{n} signed a contract with {v}."),
            (
                "I've switched jobs and now work for {v}.",
                "{n} switched jobs and now works for {v}.",
            ),
            ("{v} hired me!", "{v} hired {n}."),
        ),
        current=(("Who do I work for?", "Who does {n} work for?"),),
        past=(("Who was I working for in {when}?", "Who was {n} working for in {when}?"),),
        when=(("When did I start at {v}?", "When did {n} start at {v}?"),),
    ),
    "job title": Attribute(
        values=tuple(TITLES),
        first=(("I'm a {v} by profession.", "{n} is a {v} by profession."),),
        change=(
            ("I changed careers and became a {v}.", "{n} changed careers and became a {v}."),
            ("My title is now {v}.", "{n}'s title is now {v}."),
        ),
        current=(("What is my profession?", "What is {n}'s profession?"),),
        past=(("What was my profession in {when}?", "What was {n}'s profession in {when}?"),),
        when=(("When did I start working as a {v}?", "When did {n} start working as a {v}?"),),
    ),
    "favourite food": Attribute(
        values=tuple(FOODS),
        first=(
            ("Nothing beats {v} for me.", "{n} loves {v} more than any other food."),
            ("My favorite dish is {v}.", "{n}'s favorite dish is {v}."),
        ),
        change=(
            ("My favorite food these days is {v}.", "{n}'s favorite food is now {v}."),
            ("I've got a new favourite: {v}.", "{n} has a new favourite food: {v}."),
        ),
        current=(("Which food do I like best?", "Which food does {n} like best?"),),
        past=(
            ("Which food did I like best in {when}?", "Which food did {n} like best in {when}?"),
        ),
        when=(("When did I start loving {v}?", "When did {n} start loving {v}?"),),
    ),
    "car": Attribute(
        values=tuple(CARS),
        first=(("I own a {v}.", "{n} owns a {v}."),),
        change=(
            (
                "Just picked up my new {v} from the dealer.",
                "{n} picked up a new {v} from the dealer.",
            ),
            ("I'm driving a {v} now.", "{n} is driving a {v} now."),
            ("Sold the old car and got a {v}.", "{n} sold the old car and got a {v}."),
        ),
        current=(("What do I drive?", "What does {n} drive?"),),
        past=(("What was I driving in {when}?", "What was {n} driving in {when}?"),),
        when=(("When did I buy the {v}?", "When did {n} buy the {v}?"),),
    ),
    "rent": Attribute(
        values=tuple(f"{amount:,} euros" for amount in range(700, 2600, 50)),
        first=(("I pay {v} a month for my apartment.", "{n} pays {v} a month for the apartment."),),
        change=(
            ("My rent is now {v}.", "{n}'s rent is now {v}."),
            ("New lease signed: {v} per month.", "{n} signed a new lease at {v} per month."),
        ),
        current=(("What is my monthly rent?", "What is {n}'s monthly rent?"),),
        past=(("What was my rent in {when}?", "What was {n}'s rent in {when}?"),),
        when=(("When did my rent become {v}?", "When did {n}'s rent become {v}?"),),
    ),
    "diet": Attribute(
        values=tuple(DIETS),
        first=(("I eat a {v} diet.", "{n} eats a {v} diet."),),
        change=(("I became {v}.", "{n} became {v}."), ("I'm {v} now.", "{n} is {v} now.")),
        current=(("What is my diet?", "What is {n}'s diet?"),),
        past=(("What was my diet in {when}?", "What was {n}'s diet in {when}?"),),
        when=(("When did I become {v}?", "When did {n} become {v}?"),),
    ),
    "seats": Attribute(
        values=tuple(SEATS),
        first=(("I always pick {v} seats when I fly.", "{n} always picks {v} seats when flying."),),
        change=(
            ("I now prefer {v} seats.", "{n} now prefers {v} seats."),
            ("Switching to {v} seats for flights from now on.", "{n} wants {v} seats from now on."),
        ),
        current=(
            ("What seats should I book for my flights?", "What seats should I book for {n}?"),
        ),
        past=(("What seats did I prefer in {when}?", "What seats did {n} prefer in {when}?"),),
        when=(("When did I switch to {v} seats?", "When did {n} switch to {v} seats?"),),
    ),
}
#: A third set, written last and blind to slm's fact reader (nobody read it while writing
#: these, nor tuned on them): ``--phrasings fresh`` measures how the text reader
#: generalises to wording no one developed against. Its phrasings mix chat ("ugh, landlord
#: bumped the rent"), terse notes as an agent would store them ("Monthly rent: ..."), the
#: value early or late, and longer sentences with an extra clause.
FRESH: dict[str, Attribute] = {
    "residence": Attribute(
        values=tuple(CITIES),
        first=(
            (
                "I've got an apartment in {v}, not far from the old town.",
                "{n} has an apartment in {v}, not far from the old town.",
            ),
            (
                "{V} is where I've lived for the past few years.",
                "{V} is where {n} has lived for the past few years.",
            ),
            ("Current city: {v}.", "{n} - current city: {v}."),
            (
                "fyi I'm over in {v}, so mind the time zone when you set up calls",
                "{n} is over in {v}, so mind the time zone when setting up calls.",
            ),
        ),
        change=(
            (
                "Signed the lease on a flat in {v} and the boxes are finally unpacked.",
                "{n} signed the lease on a flat in {v} and has finished unpacking.",
            ),
            (
                "we're in {v} now!! the movers left an hour ago",
                "{n} texted from {v}: the movers just left and the new place is theirs.",
            ),
            (
                "Address change: new place is in {v}; forward anything from the old address.",
                "Address change for {n}: new place is in {v}.",
            ),
            (
                "After months of flat-hunting I've made the move to {v}, which still feels unreal.",
                "After months of flat-hunting, {n} has made the move to {v}.",
            ),
            (
                "Got my {v} residence registration sorted, so it's official: I'm a local now.",
                "{n} registered as a resident of {v}, so the move there is official.",
            ),
        ),
        current=(
            ("What's my home city right now?", "What's {n}'s home city right now?"),
            ("Where am I living at the moment?", "Where is {n} living at the moment?"),
        ),
        past=(
            (
                "Back in {when}, which city did I call home?",
                "Back in {when}, which city did {n} call home?",
            ),
            ("Where was I based as of {when}?", "Where was {n} based as of {when}?"),
        ),
        when=(
            ("When did I make the move to {v}?", "When did {n} make the move to {v}?"),
            ("Since when have I been living in {v}?", "Since when has {n} been living in {v}?"),
        ),
    ),
    "employer": Attribute(
        values=tuple(COMPANIES),
        first=(
            ("I'm on the payroll at {v}.", "{n} is on the payroll at {v}."),
            (
                "{V} is the company I've been with since I graduated.",
                "{V} is the company {n} has been with since graduating.",
            ),
            ("Employer: {v}.", "{n} - employer: {v}."),
        ),
        change=(
            (
                "Handed in my notice at the old place; {v} has me starting on the first.",
                "{n} handed in notice at the old job; {v} has them starting on the first.",
            ),
            ("got the offer from {v} and said yes!!", "{n} said yes to an offer from {v}."),
            (
                "First week at {v} done, the onboarding was a lot.",
                "{n} has wrapped up a first week at {v}.",
            ),
            ("Job change: now with {v}.", "Job change for {n}: now with {v}."),
            (
                "After almost four years at my old company I've moved over to {v}, "
                "which pays better and is closer to home.",
                "After almost four years at the old company, {n} has moved over to {v} "
                "for better pay.",
            ),
        ),
        current=(
            ("Who's my employer at the moment?", "Who's {n}'s employer at the moment?"),
            (
                "Which company pays my salary these days?",
                "Which company pays {n}'s salary these days?",
            ),
        ),
        past=(
            ("Which company was I with in {when}?", "Which company was {n} with in {when}?"),
            ("Who employed me back in {when}?", "Who employed {n} back in {when}?"),
        ),
        when=(
            ("When did I take the job at {v}?", "When did {n} take the job at {v}?"),
            ("When did I move over to {v}?", "When did {n} move over to {v}?"),
        ),
    ),
    "job title": Attribute(
        values=tuple(TITLES),
        first=(
            ("Job title: {v}.", "{n}'s job title: {v}."),
            ("{V} by trade, and happy with it.", "{n} is a {v} by trade."),
            (
                "I earn my living as a {v}, though I'd like to do more writing on the side.",
                "{n} earns a living as a {v}, with some writing on the side.",
            ),
        ),
        change=(
            (
                "Title change went through: {v}, effective this month.",
                "{n}'s title changed to {v}, effective this month.",
            ),
            (
                "Finished the retraining and I'm officially a {v} now - nervous but excited!",
                "{n} finished retraining and is officially a {v} now.",
            ),
            ("HR updated my role to {v}.", "HR updated {n}'s role to {v}."),
            ("so I'm a {v} now, long story", "{n} is a {v} now - long story."),
        ),
        current=(
            ("What's my current role?", "What's {n}'s current role?"),
            ("What's my occupation?", "What's {n}'s occupation?"),
        ),
        past=(("What role did I have in {when}?", "What role did {n} have in {when}?"),),
        when=(
            ("When did I take on the {v} role?", "When did {n} take on the {v} role?"),
            ("Since when have I had the title {v}?", "Since when has {n} had the title {v}?"),
        ),
    ),
    "favourite food": Attribute(
        values=tuple(FOODS),
        first=(
            (
                "If I could eat one thing forever, it'd be {v}.",
                "If {n} could eat one thing forever, it'd be {v}.",
            ),
            (
                "Whenever we order in I get {v}; nothing else comes close.",
                "{n} gets {v} whenever ordering in; nothing else comes close.",
            ),
            ("Favourite food: {v}.", "{n} - favourite food: {v}."),
        ),
        change=(
            (
                "ok new obsession: {v}. three orders this week alone",
                "{n} has a new food obsession: {v}, ordered three times this week.",
            ),
            (
                "I used to say something else, but honestly my top food now is {v}.",
                "{n} says their top food now is {v}.",
            ),
            (
                "Updated food preference: {v} (replaces the previous favourite).",
                "Updated food preference for {n}: {v} (replaces the previous favourite).",
            ),
            (
                "Ever since that trip I can't stop thinking about {v}, which has overtaken "
                "everything else I like to eat.",
                "Since that trip {n} can't stop thinking about {v}, which has overtaken "
                "every other food for them.",
            ),
        ),
        current=(
            ("What food do I love most?", "What food does {n} love most?"),
            (
                "If you were ordering me dinner, what would I want most?",
                "If I'm ordering dinner for {n}, what would they want most?",
            ),
        ),
        past=(
            (
                "Back in {when}, what was my go-to food?",
                "Back in {when}, what was {n}'s go-to food?",
            ),
        ),
        when=(("When did I get hooked on {v}?", "When did {n} get hooked on {v}?"),),
    ),
    "car": Attribute(
        values=tuple(CARS),
        first=(
            (
                "My car's a {v}, silver, nothing fancy.",
                "{n}'s car is a {v}, silver, nothing fancy.",
            ),
            ("Vehicle: {v}.", "{n} - vehicle: {v}."),
            ("I get around in a {v}.", "{n} gets around in a {v}."),
        ),
        change=(
            (
                "Collected the keys to my {v} this morning; the old one went to the scrapyard.",
                "{n} collected the keys to a {v}; the old car went to the scrapyard.",
            ),
            ("finally upgraded to a {v}, so happy with it", "{n} finally upgraded to a {v}."),
            ("Car replaced: now a {v}.", "Car replaced for {n}: now a {v}."),
            (
                "The lease on the old car ran out, so I went with a {v}, "
                "mostly for the lower running costs.",
                "The lease on {n}'s old car ran out, so they went with a {v}.",
            ),
        ),
        current=(
            ("What's my current car?", "What's {n}'s current car?"),
            ("Which car do I have right now?", "Which car does {n} have right now?"),
        ),
        past=(("Which car did I have back in {when}?", "Which car did {n} have back in {when}?"),),
        when=(
            ("When did I upgrade to the {v}?", "When did {n} upgrade to the {v}?"),
            ("When did I start driving the {v}?", "When did {n} start driving the {v}?"),
        ),
    ),
    "rent": Attribute(
        values=tuple(f"{amount:,} euros" for amount in range(700, 2600, 50)),
        first=(
            ("Rent's {v} a month, bills not included.", "{n}'s rent is {v} a month, bills extra."),
            ("Monthly rent: {v}.", "{n} - monthly rent: {v}."),
            (
                "{V} a month goes to my landlord, which is about a third of my salary.",
                "{V} a month goes to {n}'s landlord.",
            ),
        ),
        change=(
            (
                "Lease renewal came through and it's {v} a month from now on.",
                "{n}'s lease renewal came through at {v} a month.",
            ),
            ("ugh, landlord bumped the rent to {v}", "{n}'s landlord bumped the rent to {v}."),
            (
                "Rent adjusted to {v}/month from this month.",
                "{n}'s rent adjusted to {v}/month from this month.",
            ),
            (
                "Got the rent renegotiated: {v} a month, which at least includes parking.",
                "{n} renegotiated the rent to {v} a month, parking included.",
            ),
        ),
        current=(
            ("How much do I pay in rent now?", "How much does {n} pay in rent now?"),
            (
                "What does my flat cost me each month?",
                "What does {n}'s flat cost each month?",
            ),
        ),
        past=(
            (
                "What was I paying in rent in {when}?",
                "What was {n} paying in rent in {when}?",
            ),
        ),
        when=(("When did my rent go to {v}?", "When did {n}'s rent go to {v}?"),),
    ),
    "diet": Attribute(
        values=tuple(DIETS),
        first=(
            ("Dietary note: {v}.", "{n} - dietary note: {v}."),
            (
                "I've been eating {v} for years, so keep that in mind for dinner plans.",
                "{n} has been eating {v} for years, so keep that in mind for dinner plans.",
            ),
            (
                "Please remember I'm {v} when you suggest restaurants.",
                "Remember {n} is {v} when suggesting restaurants.",
            ),
        ),
        change=(
            ("New diet: {v}, starting this week.", "{n}'s new diet: {v}, starting this week."),
            (
                "My doctor suggested a change, so I'm following a {v} diet now.",
                "On the doctor's advice {n} follows a {v} diet now.",
            ),
            ("officially {v} as of this month!", "{n} is officially {v} as of this month."),
            ("Dietary restrictions updated: {v}.", "Dietary restrictions for {n} updated: {v}."),
            (
                "I've given up my old way of eating and stick to {v} meals now, "
                "which means the usual restaurants need rethinking.",
                "{n} has given up the old way of eating and sticks to {v} meals now.",
            ),
        ),
        current=(
            (
                "What am I eating these days, diet-wise?",
                "What is {n} eating these days, diet-wise?",
            ),
            ("What are my dietary restrictions?", "What are {n}'s dietary restrictions?"),
        ),
        past=(("Which diet was I on in {when}?", "Which diet was {n} on in {when}?"),),
        when=(
            ("When did I start eating {v}?", "When did {n} start eating {v}?"),
            ("When did I switch over to {v} meals?", "When did {n} switch over to {v} meals?"),
        ),
    ),
    "seats": Attribute(
        values=tuple(SEATS),
        first=(
            ("{V} seat whenever possible, please.", "{n} wants the {v} seat whenever possible."),
            (
                "On planes I always go for {v} seats - it makes long flights bearable.",
                "On planes {n} always goes for {v} seats.",
            ),
            ("Seat preference: {v}.", "{n} - seat preference: {v}."),
        ),
        change=(
            (
                "Changed my mind on seating - put me in {v} seats from now on.",
                "{n} changed their mind on seating: {v} seats from now on.",
            ),
            (
                "new rule: {v} seats only when you book for me",
                "New rule for {n}'s bookings: {v} seats only.",
            ),
            ("Seat preference updated to {v}.", "{n}'s seat preference updated to {v}."),
            (
                "After that awful flight last month I've decided {v} seats are the only ones "
                "I'll take, even if they cost extra.",
                "After a bad flight {n} decided to take only {v} seats, even at extra cost.",
            ),
        ),
        current=(
            ("Where do I like to sit when I fly?", "Where does {n} like to sit when flying?"),
            (
                "What kind of seat should you get me on a plane?",
                "What kind of seat should I get {n} on a plane?",
            ),
        ),
        past=(
            (
                "Where did I like to sit on planes in {when}?",
                "Where did {n} like to sit on planes in {when}?",
            ),
        ),
        when=(
            ("When did I change to {v} seats?", "When did {n} change to {v} seats?"),
            ("Since when do I want {v} seats?", "Since when does {n} want {v} seats?"),
        ),
    ),
}
#: The phrasing sets by name.
PHRASINGS = {"dev": ATTRIBUTES, "heldout": HELDOUT, "fresh": FRESH}


DISTRACTORS = (
    "{n} visited {city} for a conference.",
    "I had dinner at a {food} place near the {company} office.",
    "{n} recommended {city} as a weekend trip.",
    "We talked about maybe visiting {city} someday.",
    "{n} read an article about {company}'s quarterly results.",
    "Remember to buy milk and coffee.",
    "{n} is training for a half marathon.",
    "I finished reading a novel set in {city}.",
    "Call the dentist about the cleaning.",
    "{n} lent me a book about {food}.",
    "The team offsite is planned for {month}.",
    "{n} had a job interview practice session with me.",
    "Watched a documentary about {city} with {n}.",
    "My friend rented a {car} for the road trip.",
    "Need to renew the passport before {month}.",
    "{n} asked for advice on negotiating rent.",
    "Tried a new {food} recipe; it was too salty.",
    "{n}'s cousin works in {city} as a {title}.",
)


@dataclass(frozen=True, slots=True)
class Note:
    label: str
    content: str
    time: datetime
    #: (person, attribute, version) of the fact value it states; None for a distractor
    fact: tuple[str, str, int] | None = None


@dataclass(frozen=True, slots=True)
class Question:
    kind: str  # "current", "as_of", "past", "when"
    text: str
    expected: str  # the label of the note that answers it
    #: the labels of the other versions of the same fact (older or newer)
    others: tuple[str, ...]
    as_of: datetime | None = None


@dataclass(slots=True)
class History:
    name: str
    notes: list[Note] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    #: the note each change note replaces (label -> label), for explicit supersession
    replaces: dict[str, str] = field(default_factory=dict)
    now: datetime = datetime(2026, 1, 1, tzinfo=UTC)


def generate(seed: int = 0, histories: int = 30, phrasings: str = "dev") -> list[History]:
    """``histories`` histories, the same for the same seed, phrased with the set named
    ``phrasings`` (:data:`PHRASINGS`)."""
    rng = random.Random(seed)
    chosen = PHRASINGS[phrasings]
    return [_history(rng, f"h{index:03d}", chosen) for index in range(histories)]


def _say(template: Say, person: str | None, value: str) -> str:
    first, third = template
    text = first if person is None else third
    return text.format(n=person, v=value, V=value[:1].upper() + value[1:], when="{when}")


def _history(rng: random.Random, name: str, attributes: dict[str, Attribute]) -> History:
    history = History(name)
    people: list[str | None] = [None, *rng.sample(NAMES, rng.randint(2, 4))]
    start = datetime(2019, 1, 1, tzinfo=UTC) + timedelta(days=rng.randint(0, 700))
    end = start
    counter = 0

    def label() -> str:
        nonlocal counter
        counter += 1
        return f"{name}-n{counter:03d}"

    for person in people:
        for attribute in rng.sample(sorted(attributes), rng.randint(2, 4)):
            spec = attributes[attribute]
            values = rng.sample(spec.values, min(len(spec.values), rng.randint(2, 5)))
            moment = start + timedelta(days=rng.randint(0, 120))
            versions: list[tuple[Note, datetime]] = []
            for index, value in enumerate(values):
                text = _say(rng.choice(spec.change if index else spec.first), person, value)
                who = person or "user"
                note = Note(label(), text, moment, (who, attribute, index))
                versions.append((note, moment))
                if index:
                    history.replaces[note.label] = versions[index - 1][0].label
                moment += timedelta(days=rng.randint(60, 540))
            end = max(end, versions[-1][1])
            history.notes.extend(note for note, _ in versions)
            _questions(rng, history, spec, person, versions, values)
    facts = len(history.notes)
    total = max(20, min(200, facts + rng.randint(facts // 2, 3 * facts)))
    span = max(1, int((end - start).total_seconds()))
    for _ in range(total - facts):
        moment = start + timedelta(seconds=rng.randint(0, span))
        text = rng.choice(DISTRACTORS).format(
            n=rng.choice([p for p in people if p] or NAMES),
            city=rng.choice(CITIES),
            company=rng.choice(COMPANIES),
            food=rng.choice(FOODS),
            car=rng.choice(CARS),
            title=rng.choice(TITLES),
            month=rng.choice(MONTHS),
        )
        history.notes.append(Note(label(), text, moment))
    history.notes.sort(key=lambda note: (note.time, note.label))
    history.now = end + timedelta(days=30)
    return history


def _questions(
    rng: random.Random,
    history: History,
    spec: Attribute,
    person: str | None,
    versions: list[tuple[Note, datetime]],
    values: list[str],
) -> None:
    labels = [note.label for note, _ in versions]

    def others(keep: str) -> tuple[str, ...]:
        return tuple(label for label in labels if label != keep)

    current = _say(rng.choice(spec.current), person, values[-1])
    history.questions.append(Question("current", current, labels[-1], others(labels[-1])))
    # A past moment well inside one earlier version's time (a month after it started, a
    # month before the next), asked as as_of and in words.
    index = rng.randrange(len(versions) - 1)
    begin, until = versions[index][1], versions[index + 1][1]
    if (until - begin).days > 70:
        moment = begin + timedelta(days=rng.randint(31, (until - begin).days - 31))
        words = f"{MONTHS[moment.month - 1]} {moment.year}"
        past = _say(rng.choice(spec.past), person, values[index]).format(when=words)
        expected = labels[index]
        history.questions.append(Question("as_of", current, expected, others(expected), moment))
        history.questions.append(Question("past", past, expected, others(expected)))
    changed = rng.randrange(1, len(versions))
    when = _say(rng.choice(spec.when), person, values[changed])
    history.questions.append(Question("when", when, labels[changed], others(labels[changed])))
