"""What one request may ask for, checked on its parsed document before the
schema's validation rules run: how deep its fields nest and how many fields
its answer would name, fragments counted where they are spread.

graphql-core bounds neither. The schema has types that contain themselves
(``MenuItem.subItems``, and introspection's ``__Type.ofType``), so a short
query can ask for an answer that grows with every level; and a request of
thousands of aliases costs more to validate than to answer (the rule that
fields of one response name can be merged compares them pairwise), so the
count must come first, in one pass that fragments cannot make exponential.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)


@dataclass(frozen=True)
class Size:
    depth: int
    """Levels of fields (``{ a { b } }`` is 2)."""
    fields: int
    """Fields in all, each alias and each spread of a fragment counted."""


class _Measure:
    """Sizes of selection sets, counted up to one past the bounds (what is
    past them need not be walked), each fragment measured once."""

    def __init__(self, document: DocumentNode, max_depth: int, max_fields: int) -> None:
        self._fragments = {
            d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
        }
        self._max_depth, self._max_fields = max_depth, max_fields
        self._sizes: dict[str, Size] = {}

    def selections(self, selections: SelectionSetNode | None, spreading: frozenset[str]) -> Size:
        if selections is None:
            return Size(0, 0)
        depth = fields = 0
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                inner = self.selections(selection.selection_set, spreading)
                size = Size(1 + inner.depth, 1 + inner.fields)
            elif isinstance(selection, FragmentSpreadNode):
                size = self._spread(selection.name.value, spreading)
            elif isinstance(selection, InlineFragmentNode):  # its fields are at this level
                size = self.selections(selection.selection_set, spreading)
            else:
                continue
            depth, fields = max(depth, size.depth), fields + size.fields
            if depth > self._max_depth or fields > self._max_fields:
                break
        return Size(depth, fields)

    def _spread(self, name: str, spreading: frozenset[str]) -> Size:
        # A fragment spread in a cycle is refused by NoFragmentCyclesRule.
        if name in spreading:
            return Size(0, 0)
        if name not in self._sizes:
            fragment = self._fragments.get(name)
            selections = fragment.selection_set if fragment is not None else None
            self._sizes[name] = self.selections(selections, spreading | {name})
        return self._sizes[name]


def size_error(document: DocumentNode, max_depth: int, max_fields: int) -> GraphQLError | None:
    """What is wrong with the size of ``document``'s first operation past
    the bounds, None if each is within them."""
    measure = _Measure(document, max_depth, max_fields)
    for operation in document.definitions:
        if not isinstance(operation, OperationDefinitionNode):
            continue
        size = measure.selections(operation.selection_set, frozenset())
        if size.depth > max_depth:
            return GraphQLError(
                f"the query nests its fields more than {max_depth} levels deep, more than this node "
                f"answers (--query-max-depth {max_depth}); ask for fewer levels at once",
                operation,
            )
        if size.fields > max_fields:
            return GraphQLError(
                f"the query asks for more than {max_fields} fields, more than this node answers at once "
                f"(--query-max-fields {max_fields}); split it over several requests",
                operation,
            )
    return None
