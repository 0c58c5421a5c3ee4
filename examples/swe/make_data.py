"""Writes train.jsonl and eval.jsonl: tiny repositories, each with one bug and a failing test.

Run ``python examples/swe/make_data.py`` after editing a task below. Every task
is a small Python package with a ``tests/`` directory (stdlib ``unittest``), a
bug that the visible test exposes, hidden tests that check the fix more widely,
and the reference ``solution`` (the fixed module) that the scripted policy uses.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

SYSTEM = (
    "You are a software engineer working in a Python repository in your current directory. "
    "Tools: shell(command) runs a shell command there; read_file(path) shows a file; "
    "write_file(path, content) replaces a file. Run the tests with "
    "`python -m unittest discover -s tests`. Fix the bug in the code so the tests pass; "
    "do not change the tests. When you are done, reply with a one-line summary and no tool call."
)


def code(text: str) -> str:
    """A file's content written as an indented block below."""
    return textwrap.dedent(text).lstrip("\n")


TASKS = [
    {
        "name": "calc_add",
        "issue": "`calc.add(2, 3)` returns -1 instead of 5.",
        "module": "calc.py",
        "buggy": code(
            """
            def add(a, b):
                return a - b


            def mul(a, b):
                return a * b
            """
        ),
        "fixed": code(
            """
            def add(a, b):
                return a + b


            def mul(a, b):
                return a * b
            """
        ),
        "visible": code(
            """
            from calc import add


            class TestAdd(unittest.TestCase):
                def test_small(self):
                    self.assertEqual(add(2, 3), 5)
            """
        ),
        "hidden": code(
            """
            from calc import add, mul


            class TestHidden(unittest.TestCase):
                def test_negative(self):
                    self.assertEqual(add(-4, 1), -3)

                def test_zero(self):
                    self.assertEqual(add(0, 5), 5)

                def test_mul_still_works(self):
                    self.assertEqual(mul(3, 4), 12)
            """
        ),
    },
    {
        "name": "slugify",
        "issue": "`text.slugify('Hello World')` gives 'Hello-World'; slugs must be lower case.",
        "module": "text.py",
        "buggy": code(
            """
            def slugify(title):
                return '-'.join(title.split())
            """
        ),
        "fixed": code(
            """
            def slugify(title):
                return '-'.join(title.lower().split())
            """
        ),
        "visible": code(
            """
            from text import slugify


            class TestSlug(unittest.TestCase):
                def test_lower(self):
                    self.assertEqual(slugify('Hello World'), 'hello-world')
            """
        ),
        "hidden": code(
            """
            from text import slugify


            class TestHidden(unittest.TestCase):
                def test_spaces(self):
                    self.assertEqual(slugify('  A  Big   Day '), 'a-big-day')

                def test_one_word(self):
                    self.assertEqual(slugify('PYTHON'), 'python')
            """
        ),
    },
    {
        "name": "stats_mean",
        "issue": "`stats.mean([1, 2, 3])` returns 3.0; the mean of 1, 2, 3 is 2.0.",
        "module": "stats.py",
        "buggy": code(
            """
            def mean(values):
                return sum(values) / (len(values) - 1)
            """
        ),
        "fixed": code(
            """
            def mean(values):
                return sum(values) / len(values)
            """
        ),
        "visible": code(
            """
            from stats import mean


            class TestMean(unittest.TestCase):
                def test_three(self):
                    self.assertEqual(mean([1, 2, 3]), 2.0)
            """
        ),
        "hidden": code(
            """
            from stats import mean


            class TestHidden(unittest.TestCase):
                def test_single(self):
                    self.assertEqual(mean([7]), 7.0)

                def test_floats(self):
                    self.assertAlmostEqual(mean([0.5, 1.5]), 1.0)
            """
        ),
    },
    {
        "name": "leap_year",
        "issue": "`dates.is_leap(1900)` is True, but 1900 was not a leap year (centuries must divide by 400).",
        "module": "dates.py",
        "buggy": code(
            """
            def is_leap(year):
                return year % 4 == 0
            """
        ),
        "fixed": code(
            """
            def is_leap(year):
                return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
            """
        ),
        "visible": code(
            """
            from dates import is_leap


            class TestLeap(unittest.TestCase):
                def test_1900(self):
                    self.assertFalse(is_leap(1900))
            """
        ),
        "hidden": code(
            """
            from dates import is_leap


            class TestHidden(unittest.TestCase):
                def test_2000(self):
                    self.assertTrue(is_leap(2000))

                def test_2024(self):
                    self.assertTrue(is_leap(2024))

                def test_2023(self):
                    self.assertFalse(is_leap(2023))

                def test_other_centuries(self):
                    self.assertFalse(is_leap(1800))
                    self.assertFalse(is_leap(2100))
            """
        ),
    },
    {
        "name": "inventory_total",
        "issue": (
            "`inventory.total([('pen', 2, 1.5)])` returns 1.5; each item is (name, quantity, price), the total is 3.0."
        ),
        "module": "inventory.py",
        "buggy": code(
            """
            def total(items):
                return sum(price for _, _, price in items)
            """
        ),
        "fixed": code(
            """
            def total(items):
                return sum(quantity * price for _, quantity, price in items)
            """
        ),
        "visible": code(
            """
            from inventory import total


            class TestTotal(unittest.TestCase):
                def test_quantity(self):
                    self.assertEqual(total([('pen', 2, 1.5)]), 3.0)
            """
        ),
        "hidden": code(
            """
            from inventory import total


            class TestHidden(unittest.TestCase):
                def test_empty(self):
                    self.assertEqual(total([]), 0)

                def test_many(self):
                    self.assertEqual(total([('a', 3, 2), ('b', 1, 5)]), 11)
            """
        ),
    },
    {
        "name": "queue_order",
        "issue": "`Queue.pop()` returns the newest item; a queue must return the oldest first.",
        "module": "fifo.py",
        "buggy": code(
            """
            class Queue:
                def __init__(self):
                    self.items = []

                def push(self, item):
                    self.items.append(item)

                def pop(self):
                    return self.items.pop()
            """
        ),
        "fixed": code(
            """
            class Queue:
                def __init__(self):
                    self.items = []

                def push(self, item):
                    self.items.append(item)

                def pop(self):
                    return self.items.pop(0)
            """
        ),
        "visible": code(
            """
            from fifo import Queue


            class TestQueue(unittest.TestCase):
                def test_oldest_first(self):
                    q = Queue()
                    q.push(1)
                    q.push(2)
                    self.assertEqual(q.pop(), 1)
            """
        ),
        "hidden": code(
            """
            from fifo import Queue


            class TestHidden(unittest.TestCase):
                def test_drain(self):
                    q = Queue()
                    for i in range(5):
                        q.push(i)
                    self.assertEqual([q.pop() for _ in range(5)], [0, 1, 2, 3, 4])
            """
        ),
    },
    {
        "name": "clamp_bounds",
        "issue": "`numbers.clamp(15, 0, 10)` returns 15; values above the upper bound must become the bound.",
        "module": "numbers_util.py",
        "buggy": code(
            """
            def clamp(value, low, high):
                return max(low, value)
            """
        ),
        "fixed": code(
            """
            def clamp(value, low, high):
                return max(low, min(value, high))
            """
        ),
        "visible": code(
            """
            from numbers_util import clamp


            class TestClamp(unittest.TestCase):
                def test_high(self):
                    self.assertEqual(clamp(15, 0, 10), 10)
            """
        ),
        "hidden": code(
            """
            from numbers_util import clamp


            class TestHidden(unittest.TestCase):
                def test_low(self):
                    self.assertEqual(clamp(-3, 0, 10), 0)

                def test_inside(self):
                    self.assertEqual(clamp(4, 0, 10), 4)

                def test_far_above(self):
                    self.assertEqual(clamp(99, -5, 5), 5)
            """
        ),
    },
    {
        "name": "temperature",
        "issue": "`convert.c_to_f(100)` returns 132.0; water boils at 212 F.",
        "module": "convert.py",
        "buggy": code(
            """
            def c_to_f(celsius):
                return celsius + 32
            """
        ),
        "fixed": code(
            """
            def c_to_f(celsius):
                return celsius * 9 / 5 + 32
            """
        ),
        "visible": code(
            """
            from convert import c_to_f


            class TestConvert(unittest.TestCase):
                def test_boiling(self):
                    self.assertEqual(c_to_f(100), 212)
            """
        ),
        "hidden": code(
            """
            from convert import c_to_f


            class TestHidden(unittest.TestCase):
                def test_freezing(self):
                    self.assertEqual(c_to_f(0), 32)

                def test_minus_forty(self):
                    self.assertEqual(c_to_f(-40), -40)
            """
        ),
    },
    {
        "name": "word_count",
        "issue": "`words.count_words('The the THE')` says {'The': 1, 'the': 1, 'THE': 1}; counting must ignore case.",
        "module": "words.py",
        "buggy": code(
            """
            def count_words(text):
                counts = {}
                for word in text.split():
                    counts[word] = counts.get(word, 0) + 1
                return counts
            """
        ),
        "fixed": code(
            """
            def count_words(text):
                counts = {}
                for word in text.lower().split():
                    counts[word] = counts.get(word, 0) + 1
                return counts
            """
        ),
        "visible": code(
            """
            from words import count_words


            class TestWords(unittest.TestCase):
                def test_case(self):
                    self.assertEqual(count_words('The the THE'), {'the': 3})
            """
        ),
        "hidden": code(
            """
            from words import count_words


            class TestHidden(unittest.TestCase):
                def test_mixed(self):
                    self.assertEqual(count_words('a B b'), {'a': 1, 'b': 2})

                def test_empty(self):
                    self.assertEqual(count_words(''), {})
            """
        ),
    },
    {
        "name": "flatten",
        "issue": "`lists.flatten([1, [2, [3]]])` returns [1, 2, [3]]; nested lists must be flattened at every depth.",
        "module": "lists.py",
        "buggy": code(
            """
            def flatten(items):
                out = []
                for item in items:
                    if isinstance(item, list):
                        out.extend(item)
                    else:
                        out.append(item)
                return out
            """
        ),
        "fixed": code(
            """
            def flatten(items):
                out = []
                for item in items:
                    if isinstance(item, list):
                        out.extend(flatten(item))
                    else:
                        out.append(item)
                return out
            """
        ),
        "visible": code(
            """
            from lists import flatten


            class TestFlatten(unittest.TestCase):
                def test_deep(self):
                    self.assertEqual(flatten([1, [2, [3]]]), [1, 2, 3])
            """
        ),
        "hidden": code(
            """
            from lists import flatten


            class TestHidden(unittest.TestCase):
                def test_flat(self):
                    self.assertEqual(flatten([1, 2]), [1, 2])

                def test_empty_lists(self):
                    self.assertEqual(flatten([[], [[]], [4]]), [4])
            """
        ),
    },
    {
        "name": "palindrome",
        "issue": "`checks.is_palindrome('Never odd or even')` is False; case and spaces must not matter.",
        "module": "checks.py",
        "buggy": code(
            """
            def is_palindrome(text):
                return text == text[::-1]
            """
        ),
        "fixed": code(
            """
            def is_palindrome(text):
                letters = ''.join(text.lower().split())
                return letters == letters[::-1]
            """
        ),
        "visible": code(
            """
            from checks import is_palindrome


            class TestPalindrome(unittest.TestCase):
                def test_phrase(self):
                    self.assertTrue(is_palindrome('Never odd or even'))
            """
        ),
        "hidden": code(
            """
            from checks import is_palindrome


            class TestHidden(unittest.TestCase):
                def test_not(self):
                    self.assertFalse(is_palindrome('Python'))

                def test_word(self):
                    self.assertTrue(is_palindrome('Level'))
            """
        ),
    },
    {
        "name": "primes",
        "issue": "`primes.is_prime(1)` is True, but 1 is not prime.",
        "module": "primes.py",
        "buggy": code(
            """
            def is_prime(n):
                return all(n % d for d in range(2, int(n ** 0.5) + 1))
            """
        ),
        "fixed": code(
            """
            def is_prime(n):
                return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))
            """
        ),
        "visible": code(
            """
            from primes import is_prime


            class TestPrimes(unittest.TestCase):
                def test_one(self):
                    self.assertFalse(is_prime(1))
            """
        ),
        "hidden": code(
            """
            from primes import is_prime


            class TestHidden(unittest.TestCase):
                def test_zero(self):
                    self.assertFalse(is_prime(0))

                def test_small(self):
                    self.assertEqual([n for n in range(12) if is_prime(n)], [2, 3, 5, 7, 11])
            """
        ),
    },
]
EVAL = {"leap_year", "queue_order", "word_count", "primes"}


def row(task: dict[str, str]) -> dict[str, object]:
    test_name = f"tests/test_{task['module'].removesuffix('.py')}.py"
    header = "import unittest\n\n"
    return {
        "name": task["name"],
        "prompt_messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Issue: {task['issue']}"},
        ],
        "repo": {
            task["module"]: task["buggy"],
            test_name: header + task["visible"],
            "README.md": f"# {task['name']}\n\nA tiny project. Tests: `python -m unittest discover -s tests`.\n",
        },
        "hidden_tests": {f"tests/test_hidden_{task['name']}.py": header + task["hidden"]},
        "solution": {task["module"]: task["fixed"]},
    }


def main() -> None:
    here = Path(__file__).resolve().parent
    for split, names in (("train", lambda n: n not in EVAL), ("eval", lambda n: n in EVAL)):
        rows = [row(task) for task in TASKS if names(task["name"])]
        text = "".join(json.dumps(item, sort_keys=True) + "\n" for item in rows)
        (here / f"{split}.jsonl").write_text(text, encoding="utf-8")
        print(f"{split}.jsonl: {len(rows)} tasks")


if __name__ == "__main__":
    main()
