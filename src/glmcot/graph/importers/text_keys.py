"""Which feature is a node type's text (embedded for RetrieveNode, shown for neighbours), chosen
from the data of an imported table or RDF graph (docs/graph-formats.md, "Text keys").

In order: a name-like feature (``name``, ``fullName``, ``label``, ``prefLabel``...); a first and
last name pair, joined into a composite ``name``; ``title`` (after the pair: an employee's title is
a job); a feature whose name ends in ``name``, ``title`` or ``label`` (``companyName``,
``productName``); any other text feature that is not an id; an id
feature only when nothing else is text. Only features with a value on some node of the type
count. ``--text-key TYPE=FEATURE`` (or ``TYPE=first+last``) overrides the choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

NAME_LIKE = ("name", "fullname", "displayname", "label", "preflabel")
TITLE_LIKE = ("title", "caption", "headline")  # after a first/last name pair: an employee's title is a job
COMPOSITE_PAIRS = (("firstname", "lastname"), ("givenname", "familyname"), ("forename", "surname"))
COMPOSITE_FEATURE = "name"  # where a composite key's joined text is stored


def _plain(name: str) -> str:
    return name.replace("_", "").replace("-", "").replace(" ", "").lower()


def is_id_like(name: str) -> bool:
    """An id or a key column by its name: ``id``, ``productID``, ``customer_id``, ``_id``, ``uri``."""
    return _plain(name) in ("id", "uri", "iri") or name.endswith(("ID", "Id", "_id", "-id"))


@dataclass(frozen=True)
class TextKeyChoice:
    """The chosen text feature of a type; ``parts`` when it joins several features (composite)."""

    feature: str | None
    parts: tuple[str, ...] = ()
    reason: str = ""

    def describe(self) -> str | None:
        if self.feature is None:
            return None
        return f"{self.feature} ({' + '.join(self.parts)})" if self.parts else self.feature


def composite_parts(text_features: Sequence[str]) -> tuple[str, ...]:
    """A first/last name pair among the text features, in that order, or ()."""
    by_plain = {_plain(name): name for name in text_features}
    if any(_plain(name) in NAME_LIKE for name in text_features):
        return ()
    for first, last in COMPOSITE_PAIRS:
        if first in by_plain and last in by_plain:
            return by_plain[first], by_plain[last]
    return ()


def choose_text_key(text_features: Sequence[str], other_features: Sequence[str] = (),
                    id_features: Sequence[str] = ()) -> TextKeyChoice:
    """The text key among ``text_features`` (text-valued, present on some node, in column order);
    ``other_features`` (numbers...) are the last resort after ids; ``id_features`` are the id
    columns kept as features."""
    ids = {name for name in text_features if name in id_features or is_id_like(name)}
    for wanted in NAME_LIKE:
        for name in text_features:
            if _plain(name) == wanted:
                return TextKeyChoice(name, reason="name-like")
    parts = composite_parts(text_features)
    if parts:
        return TextKeyChoice(COMPOSITE_FEATURE, parts, reason="first and last name")
    for wanted in TITLE_LIKE:
        for name in text_features:
            if _plain(name) == wanted:
                return TextKeyChoice(name, reason="title-like")
    for name in text_features:
        if name not in ids and _plain(name).endswith(("name", "title", "label")):
            return TextKeyChoice(name, reason="ends in name/title/label")
    for name in text_features:
        if name not in ids:
            return TextKeyChoice(name, reason="first text feature")
    for name in text_features:
        return TextKeyChoice(name, reason="only an id is text")
    return TextKeyChoice(None, reason="no text feature")


def join_parts(values: Sequence[object]) -> str | None:
    """A composite key's text: the present parts joined by a space (None when none is)."""
    present = [str(value).strip() for value in values if value is not None and str(value).strip()]
    return " ".join(present) or None


__all__ = ["TextKeyChoice", "choose_text_key", "composite_parts", "join_parts", "is_id_like", "NAME_LIKE",
           "COMPOSITE_FEATURE"]
