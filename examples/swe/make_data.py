"""Writes train.jsonl and eval.jsonl: tiny repositories, each with one bug and a failing test.

Run ``python examples/swe/make_data.py`` after editing a task below. Every task
is a small Python package with a ``tests/`` directory (stdlib ``unittest``), a
bug that the visible test exposes, hidden tests that check the fix more widely,
and the reference ``solution`` (the fixed module) that the scripted policy uses.
"""

from __future__ import annotations

import json
from pathlib import Path

SYSTEM = (
    "You are a software engineer working in a Python repository in your current directory. "
    "Tools: shell(command) runs a shell command there; read_file(path) shows a file; "
    "write_file(path, content) replaces a file. Run the tests with "
    "`python -m unittest discover -s tests`. Fix the bug in the code so the tests pass; "
    "do not change the tests. When you are done, reply with a one-line summary and no tool call."
)

TASKS = [
    {
        "name": "calc_add",
        "issue": "`calc.add(2, 3)` returns -1 instead of 5.",
        "module": "calc.py",
        "buggy": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
        "fixed": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n",
        "visible": "from calc import add\n\n\nclass TestAdd(unittest.TestCase):\n    def test_small(self):\n        self.assertEqual(add(2, 3), 5)\n",
        "hidden": "from calc import add, mul\n\n\nclass TestHidden(unittest.TestCase):\n    def test_negative(self):\n        self.assertEqual(add(-4, 1), -3)\n\n    def test_zero(self):\n        self.assertEqual(add(0, 5), 5)\n\n    def test_mul_still_works(self):\n        self.assertEqual(mul(3, 4), 12)\n",
    },
    {
        "name": "slugify",
        "issue": "`text.slugify('Hello World')` gives 'Hello-World'; slugs must be lower case.",
        "module": "text.py",
        "buggy": "def slugify(title):\n    return '-'.join(title.split())\n",
        "fixed": "def slugify(title):\n    return '-'.join(title.lower().split())\n",
        "visible": "from text import slugify\n\n\nclass TestSlug(unittest.TestCase):\n    def test_lower(self):\n        self.assertEqual(slugify('Hello World'), 'hello-world')\n",
        "hidden": "from text import slugify\n\n\nclass TestHidden(unittest.TestCase):\n    def test_spaces(self):\n        self.assertEqual(slugify('  A  Big   Day '), 'a-big-day')\n\n    def test_one_word(self):\n        self.assertEqual(slugify('PYTHON'), 'python')\n",
    },
    {
        "name": "stats_mean",
        "issue": "`stats.mean([1, 2, 3])` returns 3.0; the mean of 1, 2, 3 is 2.0.",
        "module": "stats.py",
        "buggy": "def mean(values):\n    return sum(values) / (len(values) - 1)\n",
        "fixed": "def mean(values):\n    return sum(values) / len(values)\n",
        "visible": "from stats import mean\n\n\nclass TestMean(unittest.TestCase):\n    def test_three(self):\n        self.assertEqual(mean([1, 2, 3]), 2.0)\n",
        "hidden": "from stats import mean\n\n\nclass TestHidden(unittest.TestCase):\n    def test_single(self):\n        self.assertEqual(mean([7]), 7.0)\n\n    def test_floats(self):\n        self.assertAlmostEqual(mean([0.5, 1.5]), 1.0)\n",
    },
    {
        "name": "leap_year",
        "issue": "`dates.is_leap(1900)` is True, but 1900 was not a leap year (centuries must divide by 400).",
        "module": "dates.py",
        "buggy": "def is_leap(year):\n    return year % 4 == 0\n",
        "fixed": "def is_leap(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n",
        "visible": "from dates import is_leap\n\n\nclass TestLeap(unittest.TestCase):\n    def test_1900(self):\n        self.assertFalse(is_leap(1900))\n",
        "hidden": "from dates import is_leap\n\n\nclass TestHidden(unittest.TestCase):\n    def test_2000(self):\n        self.assertTrue(is_leap(2000))\n\n    def test_2024(self):\n        self.assertTrue(is_leap(2024))\n\n    def test_2023(self):\n        self.assertFalse(is_leap(2023))\n",
    },
    {
        "name": "inventory_total",
        "issue": "`inventory.total([('pen', 2, 1.5)])` returns 1.5; each item is (name, quantity, price), the total is 3.0.",
        "module": "inventory.py",
        "buggy": "def total(items):\n    return sum(price for _, _, price in items)\n",
        "fixed": "def total(items):\n    return sum(quantity * price for _, quantity, price in items)\n",
        "visible": "from inventory import total\n\n\nclass TestTotal(unittest.TestCase):\n    def test_quantity(self):\n        self.assertEqual(total([('pen', 2, 1.5)]), 3.0)\n",
        "hidden": "from inventory import total\n\n\nclass TestHidden(unittest.TestCase):\n    def test_empty(self):\n        self.assertEqual(total([]), 0)\n\n    def test_many(self):\n        self.assertEqual(total([('a', 3, 2), ('b', 1, 5)]), 11)\n",
    },
    {
        "name": "queue_order",
        "issue": "`Queue.pop()` returns the newest item; a queue must return the oldest first.",
        "module": "fifo.py",
        "buggy": "class Queue:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        self.items.append(item)\n\n    def pop(self):\n        return self.items.pop()\n",
        "fixed": "class Queue:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        self.items.append(item)\n\n    def pop(self):\n        return self.items.pop(0)\n",
        "visible": "from fifo import Queue\n\n\nclass TestQueue(unittest.TestCase):\n    def test_oldest_first(self):\n        q = Queue()\n        q.push(1)\n        q.push(2)\n        self.assertEqual(q.pop(), 1)\n",
        "hidden": "from fifo import Queue\n\n\nclass TestHidden(unittest.TestCase):\n    def test_drain(self):\n        q = Queue()\n        for i in range(5):\n            q.push(i)\n        self.assertEqual([q.pop() for _ in range(5)], [0, 1, 2, 3, 4])\n",
    },
    {
        "name": "clamp_bounds",
        "issue": "`numbers.clamp(15, 0, 10)` returns 15; values above the upper bound must become the bound.",
        "module": "numbers_util.py",
        "buggy": "def clamp(value, low, high):\n    return max(low, value)\n",
        "fixed": "def clamp(value, low, high):\n    return max(low, min(value, high))\n",
        "visible": "from numbers_util import clamp\n\n\nclass TestClamp(unittest.TestCase):\n    def test_high(self):\n        self.assertEqual(clamp(15, 0, 10), 10)\n",
        "hidden": "from numbers_util import clamp\n\n\nclass TestHidden(unittest.TestCase):\n    def test_low(self):\n        self.assertEqual(clamp(-3, 0, 10), 0)\n\n    def test_inside(self):\n        self.assertEqual(clamp(4, 0, 10), 4)\n",
    },
    {
        "name": "temperature",
        "issue": "`convert.c_to_f(100)` returns 132.0; water boils at 212 F.",
        "module": "convert.py",
        "buggy": "def c_to_f(celsius):\n    return celsius + 32\n",
        "fixed": "def c_to_f(celsius):\n    return celsius * 9 / 5 + 32\n",
        "visible": "from convert import c_to_f\n\n\nclass TestConvert(unittest.TestCase):\n    def test_boiling(self):\n        self.assertEqual(c_to_f(100), 212)\n",
        "hidden": "from convert import c_to_f\n\n\nclass TestHidden(unittest.TestCase):\n    def test_freezing(self):\n        self.assertEqual(c_to_f(0), 32)\n\n    def test_minus_forty(self):\n        self.assertEqual(c_to_f(-40), -40)\n",
    },
    {
        "name": "word_count",
        "issue": "`words.count_words('The the THE')` says {'The': 1, 'the': 1, 'THE': 1}; counting must ignore case.",
        "module": "words.py",
        "buggy": "def count_words(text):\n    counts = {}\n    for word in text.split():\n        counts[word] = counts.get(word, 0) + 1\n    return counts\n",
        "fixed": "def count_words(text):\n    counts = {}\n    for word in text.lower().split():\n        counts[word] = counts.get(word, 0) + 1\n    return counts\n",
        "visible": "from words import count_words\n\n\nclass TestWords(unittest.TestCase):\n    def test_case(self):\n        self.assertEqual(count_words('The the THE'), {'the': 3})\n",
        "hidden": "from words import count_words\n\n\nclass TestHidden(unittest.TestCase):\n    def test_mixed(self):\n        self.assertEqual(count_words('a B b'), {'a': 1, 'b': 2})\n\n    def test_empty(self):\n        self.assertEqual(count_words(''), {})\n",
    },
    {
        "name": "flatten",
        "issue": "`lists.flatten([1, [2, [3]]])` returns [1, 2, [3]]; nested lists must be flattened at every depth.",
        "module": "lists.py",
        "buggy": "def flatten(items):\n    out = []\n    for item in items:\n        if isinstance(item, list):\n            out.extend(item)\n        else:\n            out.append(item)\n    return out\n",
        "fixed": "def flatten(items):\n    out = []\n    for item in items:\n        if isinstance(item, list):\n            out.extend(flatten(item))\n        else:\n            out.append(item)\n    return out\n",
        "visible": "from lists import flatten\n\n\nclass TestFlatten(unittest.TestCase):\n    def test_deep(self):\n        self.assertEqual(flatten([1, [2, [3]]]), [1, 2, 3])\n",
        "hidden": "from lists import flatten\n\n\nclass TestHidden(unittest.TestCase):\n    def test_flat(self):\n        self.assertEqual(flatten([1, 2]), [1, 2])\n\n    def test_empty_lists(self):\n        self.assertEqual(flatten([[], [[]], [4]]), [4])\n",
    },
    {
        "name": "palindrome",
        "issue": "`checks.is_palindrome('Never odd or even')` is False; case and spaces must not matter.",
        "module": "checks.py",
        "buggy": "def is_palindrome(text):\n    return text == text[::-1]\n",
        "fixed": "def is_palindrome(text):\n    letters = ''.join(text.lower().split())\n    return letters == letters[::-1]\n",
        "visible": "from checks import is_palindrome\n\n\nclass TestPalindrome(unittest.TestCase):\n    def test_phrase(self):\n        self.assertTrue(is_palindrome('Never odd or even'))\n",
        "hidden": "from checks import is_palindrome\n\n\nclass TestHidden(unittest.TestCase):\n    def test_not(self):\n        self.assertFalse(is_palindrome('Python'))\n\n    def test_word(self):\n        self.assertTrue(is_palindrome('Level'))\n",
    },
    {
        "name": "primes",
        "issue": "`primes.is_prime(1)` is True, but 1 is not prime.",
        "module": "primes.py",
        "buggy": "def is_prime(n):\n    return all(n % d for d in range(2, int(n ** 0.5) + 1))\n",
        "fixed": "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n",
        "visible": "from primes import is_prime\n\n\nclass TestPrimes(unittest.TestCase):\n    def test_one(self):\n        self.assertFalse(is_prime(1))\n",
        "hidden": "from primes import is_prime\n\n\nclass TestHidden(unittest.TestCase):\n    def test_zero(self):\n        self.assertFalse(is_prime(0))\n\n    def test_small(self):\n        self.assertEqual([n for n in range(12) if is_prime(n)], [2, 3, 5, 7, 11])\n",
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
