"""Help pages in the usual shell conventions, readable at 80 columns.

Typer's Rich help draws every option in a boxed table of four columns: at 80 columns the
help text gets a quarter of the width, long option names are cut (``--max-failure-ra…``),
and each option is labelled with its Python type (``<list[str]>``, ``<int range>``, even
``<bool>`` beside a flag). The pages here are written as ``git`` and ``ls`` write theirs:
``Usage:``, the description, then one section per option group (each option's
``rich_help_panel``), each option as ``--name METAVAR`` and its help wrapped, never cut.
A required argument is written bare (``ENV``), an optional one in brackets (``[ENV]``).
"""

from __future__ import annotations

import inspect
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

if TYPE_CHECKING:
    import click

#: The section of an option that names no group.
OPTIONS = "Options"


class _Argument(TyperArgument):
    """An argument written ``NAME`` when required and ``[NAME]`` when optional, as man pages do."""

    def _usage_display_name(self) -> str:
        name = super()._usage_display_name()
        return name.replace("{", "", 1).replace("}", "", 1) if self.required else name


def _with_bare_arguments(params: list[click.Parameter]) -> list[click.Parameter]:
    for param in params:
        if type(param) is TyperArgument:
            param.__class__ = _Argument
    return params


def _metavar(param: click.Parameter) -> str:
    """What to type after an option: its own metavar, else a word for its kind (never a Python type)."""
    if param.metavar:
        return param.metavar
    return _kind_word(getattr(getattr(param, "type_descriptor", None), "annotation", str))


def _kind_word(annotation: Any) -> str:
    """``N`` for a count, ``a|b`` for a choice, ``PATH``, ``NUMBER``, ``TEXT``: what man pages write."""
    args = [arg for arg in get_args(annotation) if arg is not type(None)]
    if get_origin(annotation) is Literal:
        return "|".join(map(str, args))
    if args:  # X | None, list[X]
        return _kind_word(args[0])
    if annotation is bool:
        return ""
    if annotation is int:
        return "N"
    if annotation is float:
        return "NUMBER"
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return "PATH"
    return "TEXT"


def _unescape(text: str) -> str:
    """Help strings are written for Rich markup too (``\\[`` for a literal bracket)."""
    return text.replace("\\[", "[")


def _default(param: TyperOption) -> str | None:
    if isinstance(param.show_default, str):
        return param.show_default
    if not param.show_default or param.default is None or callable(param.default):
        return None
    if param.is_flag:
        if not param.secondary_opts:
            return None  # a lone flag is off unless given
        return (param.opts if param.default else param.secondary_opts)[0]
    if isinstance(param.default, list | tuple):
        return ", ".join(map(str, param.default)) or None
    return str(getattr(param.default, "value", param.default))


def help_record(param: click.Parameter) -> tuple[str, str] | None:
    """``(--name METAVAR, help [default: X])`` for one parameter, or None when it is hidden."""
    if getattr(param, "hidden", False):
        return None
    text = _unescape(getattr(param, "help", None) or "")
    if isinstance(param, TyperArgument):
        return param.metavar or (param.name or "").upper(), text
    assert isinstance(param, TyperOption)
    names = ", ".join(sorted(param.opts, key=len))
    if param.secondary_opts:
        names += " / " + ", ".join(param.secondary_opts)
    if not param.is_flag and not param.count:
        names += f" {_metavar(param)}"
    default = _default(param)
    if default is not None and "[default:" not in text and "(default:" not in text:
        text = f"{text} [default: {default}]".strip()
    if param.required:
        text = f"{text} [required]".strip()
    return names, text


def _sections(ctx: click.Context, params: list[click.Parameter]) -> dict[str, list[tuple[str, str]]]:
    """Rows by section, in the order the groups first appear; ungrouped options last."""
    sections: dict[str, list[tuple[str, str]]] = {}
    loose: list[tuple[str, str]] = []
    for param in params:
        record = help_record(param)
        if record is None:
            continue
        if isinstance(param, TyperArgument):
            sections.setdefault("Arguments", []).append(record)
            continue
        panel = getattr(param, "rich_help_panel", None)
        if panel:
            sections.setdefault(panel, []).append(record)
        else:
            loose.append(record)
    if loose:
        sections.setdefault(OPTIONS, []).extend(loose)
    return sections


def _description(text: str | None) -> str:
    """A docstring's paragraphs with their line breaks undone (a break is not the end of a sentence)."""
    paragraphs = inspect.cleandoc(text or "").partition("\f")[0].split("\n\n")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs if paragraph.strip())


def summary(command: click.Command) -> str:
    """A command's first paragraph, whole: the line ``benchmax --help`` lists it by."""
    return _description(command.help).split("\n\n", 1)[0]


def _write_page(
    command: click.Command, ctx: click.Context, formatter: click.HelpFormatter, extra: list[tuple[str, str]]
) -> None:
    command.format_usage(ctx, formatter)
    description = _description(command.help)
    if description:
        formatter.write_paragraph()
        with formatter.indentation():
            for index, paragraph in enumerate(description.split("\n\n")):
                if index:
                    formatter.write_paragraph()
                formatter.write_text(paragraph)
    for name, rows in [*_sections(ctx, command.get_params(ctx)).items(), *([("Commands", extra)] if extra else [])]:
        with formatter.section(name):
            formatter.write_dl(rows)


class Command(TyperCommand):
    """A command whose help is a plain, grouped page (see the module's docstring)."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _with_bare_arguments(super().get_params(ctx))

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _write_page(self, ctx, formatter, [])


class Group(TyperGroup):
    """The ``benchmax`` group, its page written as its commands' are, every command's line whole."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _with_bare_arguments(super().get_params(ctx))

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        commands = [(name, self.get_command(ctx, name)) for name in self.list_commands(ctx)]
        rows = [(name, summary(command)) for name, command in commands if command is not None and not command.hidden]
        _write_page(self, ctx, formatter, rows)
