"""A bound on how deep a query nests its fields, checked with the other
validation rules before anything runs: graphql-core has none of its own, and
the schema has types that contain themselves (``MenuItem.subItems``, and
introspection's ``__Type.ofType``), so without one a short query can ask
for an answer that grows with every level."""

from __future__ import annotations

from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationContext,
    ValidationRule,
)


def max_depth_rule(limit: int) -> type[ValidationRule]:
    """A validation rule refusing an operation whose fields nest more than
    ``limit`` levels (``{ a { b } }`` is 2), fragments counted where they are spread."""

    class MaxDepth(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            self._fragment_depths: dict[str, int] = {}

        def enter_operation_definition(self, node: OperationDefinitionNode, *_: Any) -> None:
            if self._depth(node.selection_set, frozenset()) > limit:
                self.report_error(
                    GraphQLError(
                        f"the query nests its fields more than {limit} levels deep, more than this node "
                        f"answers (--query-max-depth {limit}); ask for fewer levels at once",
                        node,
                    )
                )

        def _depth(self, selections: SelectionSetNode | None, spreading: frozenset[str]) -> int:
            """The levels of fields in ``selections``, counted up to ``limit + 1``
            (no further: what is past the bound need not be walked)."""
            if selections is None:
                return 0
            deepest = 0
            for selection in selections.selections:
                if isinstance(selection, FieldNode):
                    depth = 1 + self._depth(selection.selection_set, spreading)
                elif isinstance(selection, FragmentSpreadNode):
                    depth = self._spread(selection.name.value, spreading)
                elif isinstance(selection, InlineFragmentNode):  # its fields are at this level
                    depth = self._depth(selection.selection_set, spreading)
                else:
                    continue
                deepest = max(deepest, depth)
                if deepest > limit:
                    break
            return deepest

        def _spread(self, name: str, spreading: frozenset[str]) -> int:
            # A fragment spread in a cycle is refused by NoFragmentCyclesRule.
            if name in spreading:
                return 0
            if name not in self._fragment_depths:
                fragment = self.context.get_fragment(name)
                selections = fragment.selection_set if fragment is not None else None
                self._fragment_depths[name] = self._depth(selections, spreading | {name})
            return self._fragment_depths[name]

    return MaxDepth
