"""Addition problems as character-level token sequences, generated from a seed.

A problem of operand length n is ``a + b = s``: both operands have exactly n digits (no
leading zero unless n = 1), and the answer ``s`` is written with exactly n + 1 digits,
zero-padded on the left, so every sequence of length n has 3n + 3 tokens::

    a_1 .. a_n  +  b_1 .. b_n  =  s_0 .. s_n          (most significant digit first)

With ``reverse=True`` the answer is written least significant digit first (``s_n .. s_0``);
the operands never are. With ``carry=False`` only pairs whose column sums are all at
most 9 are drawn (no carry anywhere); with ``carry=True`` every digit is uniform.

With ``unequal=True`` (training data, as in the original study) the operands differ in
length: one of the two, chosen at random, has m digits with m uniform in 1..n, written with
n - m leading zeros so every problem of length n keeps the same 3n + 3 token layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

PLUS, EQUALS, PAD = 10, 11, 12
VOCAB = "0123456789+=_"
"""Token id -> character; ids 0-9 are the digits, 10 '+', 11 '=', 12 padding."""


def sequence_length(n: int) -> int:
    """Tokens of a full problem with operands of n digits: 3n + 3."""
    return 3 * n + 3


def prompt_length(n: int) -> int:
    """Tokens up to and including '=': 2n + 2."""
    return 2 * n + 2


def encode(text: str) -> list[int]:
    """Characters of ``VOCAB`` to token ids."""
    try:
        return [VOCAB.index(ch) for ch in text]
    except ValueError:
        raise ValueError(f"{text!r} holds a character outside {VOCAB!r}") from None


def decode(ids: npt.ArrayLike) -> str:
    """Token ids to characters."""
    return "".join(VOCAB[int(i)] for i in np.asarray(ids).ravel())


@dataclass(frozen=True)
class CharTokenizer:
    """The character vocabulary as a tiny tokenizer object (what ``ModelView`` carries)."""

    vocab: str = VOCAB
    pad_token_id: int = PAD

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        return encode(text)

    def decode(self, ids: npt.ArrayLike) -> str:
        return decode(ids)


def random_operands(
    rng: np.random.Generator, n: int, count: int, carry: bool = True, unequal: bool = False
) -> tuple[IntArray, IntArray]:
    """Two operands of n digits each, as digit arrays, most significant first.

    Args:
        rng: the random generator.
        n: digits per operand (at least 1).
        count: number of problems.
        carry: if False, every column's digit sum is at most 9 (no carries at all).
        unequal: one operand of each pair is m digits long, m uniform in 1..n (``shorten``).

    Returns:
        (a, b), each [count, n] digits; the leading digit is nonzero when n > 1 (that of
        the longer operand with ``unequal``).
    """
    if n < 1 or count < 0:
        raise ValueError(f"need n >= 1 and count >= 0 (got n={n}, count={count})")
    a = rng.integers(0, 10, size=(count, n))
    if carry:
        b = rng.integers(0, 10, size=(count, n))
    else:
        # b given a is uniform over 0..9-a, so no column can carry.
        b = np.floor(rng.random((count, n)) * (10 - a)).astype(np.int64)
    if n > 1:
        if carry:
            a[:, 0] = rng.integers(1, 10, size=count)
            b[:, 0] = rng.integers(1, 10, size=count)
        else:
            # Both leading digits in 1..8 with a sum of at most 9.
            a[:, 0] = rng.integers(1, 9, size=count)
            b[:, 0] = 1 + np.floor(rng.random(count) * (9 - a[:, 0])).astype(np.int64)
    a, b = a.astype(np.int64), b.astype(np.int64)
    if unequal and n > 1:
        shorten(rng, a, b, carry)
    return a, b


def shorten(rng: np.random.Generator, a: IntArray, b: IntArray, carry: bool) -> None:
    """Make one operand of each pair (a or b at random) m digits long, m uniform in 1..n,
    in place: its n - m leading digits become 0 and its new leading digit is nonzero (with
    ``carry=False`` only where the other operand's digit leaves room, at most 8)."""
    count, n = a.shape
    m = rng.integers(1, n + 1, size=count)
    a_short: npt.NDArray[np.bool_] = np.asarray(rng.random(count) < 0.5)
    short, other = np.where(a_short[:, None], a, b), np.where(a_short[:, None], b, a)
    short[np.arange(n)[None, :] < (n - m)[:, None]] = 0
    rows = np.flatnonzero(m > 1)
    col = n - m[rows]
    if carry:
        short[rows, col] = rng.integers(1, 10, size=len(rows))
    else:
        room = 9 - other[rows, col]
        lead = 1 + np.floor(rng.random(len(rows)) * np.maximum(room, 1)).astype(np.int64)
        short[rows, col] = np.where(room >= 1, lead, 0)
    a[a_short], b[~a_short] = short[a_short], short[~a_short]


def add_digits(a: IntArray, b: IntArray) -> tuple[IntArray, IntArray]:
    """Column-wise schoolbook addition of digit arrays.

    Args:
        a, b: [count, n] digits, most significant first.

    Returns:
        (sum, carries): the sum as [count, n + 1] digits (most significant first, with a
        leading 0 when there is no final carry), and [count] the number of carries.
    """
    count, n = a.shape
    out = np.zeros((count, n + 1), dtype=np.int64)
    carry = np.zeros(count, dtype=np.int64)
    carries = np.zeros(count, dtype=np.int64)
    for col in range(n - 1, -1, -1):
        total = a[:, col] + b[:, col] + carry
        out[:, col + 1] = total % 10
        carry = total // 10
        carries += carry
    out[:, 0] = carry
    return out, carries


def digits_to_int(digits: npt.ArrayLike) -> list[int]:
    """[count, n] digits (most significant first) to Python integers."""
    return [int("".join(str(int(d)) for d in row) or "0") for row in np.atleast_2d(digits)]


@dataclass(frozen=True)
class Problems:
    """A batch of problems of one operand length, as token ids.

    Attributes:
        n: digits per operand.
        tokens: [count, 3n + 3] the full sequences.
        reverse: whether the answers are written least significant digit first.
    """

    n: int
    tokens: IntArray
    reverse: bool

    @property
    def prompts(self) -> IntArray:
        """[count, 2n + 2] everything up to and including '='."""
        return self.tokens[:, : prompt_length(self.n)]

    @property
    def answers(self) -> IntArray:
        """[count, n + 1] the answer tokens as written (reversed or not)."""
        return self.tokens[:, prompt_length(self.n) :]


def answer_digits(answers: IntArray, reverse: bool) -> IntArray:
    """Answer tokens as written back to digits, most significant first (undoes reversal)."""
    return answers[:, ::-1] if reverse else answers


def make_problems(
    rng: np.random.Generator,
    n: int,
    count: int,
    *,
    reverse: bool = True,
    carry: bool = True,
    unequal: bool = False,
) -> Problems:
    """``count`` random problems with n-digit operands, as full token sequences."""
    a, b = random_operands(rng, n, count, carry, unequal)
    total, _ = add_digits(a, b)
    answer = total[:, ::-1] if reverse else total
    plus = np.full((count, 1), PLUS, dtype=np.int64)
    equals = np.full((count, 1), EQUALS, dtype=np.int64)
    tokens = np.concatenate([a, plus, b, equals, answer], axis=1)
    return Problems(n=n, tokens=np.ascontiguousarray(tokens), reverse=reverse)


def split_lengths(lengths: range, count: int) -> list[tuple[int, int]]:
    """Spread ``count`` problems as evenly as possible over operand lengths (the first
    lengths get one more when it does not divide)."""
    k = len(lengths)
    return [(n, count // k + (i < count % k)) for i, n in enumerate(lengths)]


@dataclass(frozen=True)
class TrainBatch:
    """A right-padded batch of mixed operand lengths.

    Attributes:
        tokens: [B, L] token ids (PAD after each sequence's end).
        targets: [B, L] the next token, or -100 where no loss is taken (only answer
            tokens are predicted).
    """

    tokens: IntArray
    targets: IntArray


def train_batch(
    rng: np.random.Generator,
    lengths: range,
    size: int,
    *,
    reverse: bool = True,
    carry: bool = True,
    unequal: bool = False,
) -> TrainBatch:
    """One training batch with problems spread evenly over ``lengths``."""
    parts = [
        make_problems(rng, n, c, reverse=reverse, carry=carry, unequal=unequal)
        for n, c in split_lengths(lengths, size)
        if c
    ]
    return pad_batch(parts)


def pad_batch(parts: list[Problems]) -> TrainBatch:
    """Right-pad problems of several lengths into one batch with answer-only targets."""
    width = max(sequence_length(p.n) for p in parts)
    tokens, targets = [], []
    for p in parts:
        count, length = p.tokens.shape
        t = np.full((count, width), PAD, dtype=np.int64)
        t[:, :length] = p.tokens
        y = np.full((count, width), -100, dtype=np.int64)
        start = prompt_length(p.n)
        # position i predicts token i + 1: the answer occupies start .. length - 1
        y[:, start - 1 : length - 1] = p.tokens[:, start:]
        tokens.append(t)
        targets.append(y)
    return TrainBatch(tokens=np.concatenate(tokens), targets=np.concatenate(targets))


class Dataset:
    """A fixed set of training problems (the original study's million sums), drawn once.

    Batches come from a fresh permutation per epoch, seeded by (seed, epoch), so the
    batch of any step is known without replaying the ones before it.
    """

    def __init__(
        self,
        seed: int,
        lengths: range,
        size: int,
        *,
        reverse: bool = True,
        carry: bool = True,
        unequal: bool = False,
    ) -> None:
        rng = np.random.default_rng([seed, 11])
        self.parts = []
        for n, c in split_lengths(lengths, size):
            if c:
                p = make_problems(rng, n, c, reverse=reverse, carry=carry, unequal=unequal)
                # one byte per token: a million sums of 10 digits take 33 MB, not 264 MB
                self.parts.append(Problems(n=n, tokens=p.tokens.astype(np.uint8), reverse=reverse))
        self.size = sum(len(p.tokens) for p in self.parts)
        self.seed = seed
        self._offsets = np.cumsum([0] + [len(p.tokens) for p in self.parts])
        self._order: tuple[int, IntArray] | None = None

    def _permutation(self, epoch: int) -> IntArray:
        if self._order is None or self._order[0] != epoch:
            order = np.random.default_rng([self.seed, 12, epoch]).permutation(self.size)
            self._order = (epoch, order)
        return self._order[1]

    def batch(self, step: int, batch_size: int) -> TrainBatch:
        """The batch of training step ``step`` (0-based)."""
        per_epoch = max(1, self.size // batch_size)
        epoch, index = divmod(step, per_epoch)
        rows = np.sort(self._permutation(epoch)[index * batch_size : (index + 1) * batch_size])
        which = np.searchsorted(self._offsets, rows, side="right") - 1
        parts = []
        for i, p in enumerate(self.parts):
            local = rows[which == i] - self._offsets[i]
            if local.size:
                parts.append(Problems(n=p.n, tokens=p.tokens[local], reverse=p.reverse))
        return pad_batch(parts)
