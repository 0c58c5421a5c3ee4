"""Help pages in the usual shell conventions: ``ENV`` required, ``[ENV]`` optional, flags untyped.

Typer's Rich help labels every option with its type, flags included (``--force <bool>``), which
reads as if the flag wanted a value, and writes a required argument as ``{ENV}`` beside an
optional ``[ENV]``. The command and group classes here drop the flag label and write required
arguments bare, keeping every other part of Typer's help as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

if TYPE_CHECKING:
    import click


class _FlagOption(TyperOption):
    """A flag shown without a type label (it is typed as itself: present or not)."""

    def display_type_rich(self, ctx: click.Context) -> str | None:
        return None


class _Argument(TyperArgument):
    """An argument written ``NAME`` when required and ``[NAME]`` when optional, as man pages do."""

    def _usage_display_name(self) -> str:
        name = super()._usage_display_name()
        return name.replace("{", "", 1).replace("}", "", 1) if self.required else name


def _without_flag_types(params: list[click.Parameter]) -> list[click.Parameter]:
    for param in params:
        if type(param) is TyperOption and param.is_flag:
            param.__class__ = _FlagOption
        elif type(param) is TyperArgument:
            param.__class__ = _Argument
    return params


class Command(TyperCommand):
    """A command whose help shows no ``<bool>`` beside its flags and no braces around its arguments."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _without_flag_types(super().get_params(ctx))


class Group(TyperGroup):
    """The ``benchmax`` group, with the same help as its commands."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _without_flag_types(super().get_params(ctx))
