"""Does the user ask for everything remembered? The one decision behind `mem_context`'s
explicit_user_recall trigger and the `explicit_user_recall` class of such a prompt.

In this order (docs/classification.md, "Asking for everything remembered"):

1. Only what the prompt says counts: code and quoted text are dropped first ("the
   `--full-context` flag", 'the label "all context"'), and a flag or file name that spells the
   words (`full_memory.py`, `--all-context`) is no word.
2. **Phrases.** A phrase of the policy's trigger (`mem_context.unlocked_by.explicit_user_recall
   .phrases`, the team may add its own), as whole words.
3. **The ask itself.** A word for all of it (everything, all, whole, full, todo, completa, ...)
   within a few words of a word for the memory (memory, stored, saved, remember, context,
   guardado, recuerdas, ...), when the prompt's memory need, by the policy's patterns or the
   learned model, is `explicit_user_recall`: "go through everything our memory holds on this
   repo", "cárgame todo lo que tengas guardado". "Know"/"sabes" count only with a word for the
   user or the project ("everything you know about us", not "about Python decorators").
4. **Guards**, for phrases and asks alike: a negation before the words in their clause ("do
   NOT load the full memory"), a reminder ("remember to run all the tests", "recuerda guardar
   todo"), and a question about the words themselves ("what is a full context window?",
   "¿qué es la memoria completa?", "how large is the full context of this model?").

A wrong unlock costs a whole-memory dump, so every rule leans to "no"; a missed one costs the
user a rephrase or a few searches. Hot path: standard library only, bounded input (the
prompt's first HEAD and last TAIL characters).
"""

from __future__ import annotations

import re

from governor.engine.classify import HEAD, TAIL, Verdict, strip_accents

CLASS = "explicit_user_recall"
WINDOW = 6  # words between the word for "all" and the word for the memory
ANSWER_WORDS = 6  # "What have you stored? Give me all of it.": the longest such answer

# What a prompt shows rather than says: code, and quoted text. (The long patterns below, kept as
# source, are needed only once a prompt asks for everything; `re` compiles them on first use and
# caches them, so a process whose prompt never gets there does not compile them.)
_SHOWN = re.compile(
    r"```[\s\S]*?(?:```|\Z)|`[^`\n]{0,500}`|\"[^\"\n]{0,500}\"|“[^”\n]{0,500}”|«[^»\n]{0,500}»"
    r"|(?<!\w)'[^'\n]{0,500}'(?!\w)"
)
_NEGATION = (
    r"\b(?:not|no|never|without|nor|dont|don't|doesnt|doesn't|isnt|isn't|aren't|won't|shouldn't|shouldnt|mustn't|"
    r"can't|cannot|avoid|skip|rather than|instead of|nunca|sin|ni|tampoco|jamas|nada de|evita|evitar)\b"
)
_CLAUSE_END = re.compile(r"[.!?;:\n]")
_SPACES = re.compile(r"[^\S\n]+")
# A token of the prompt; a word is one made of letters only (`full_memory.py`, `--all-context` are not).
_TOKEN = re.compile(r"[^\s,;:!?¿¡()\[\]{}]+")
_WORDLIKE = re.compile(r"[a-zñ']+")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words for "all of it". Spanish puts some after the noun: "la memoria completa".
_ALL = _words("everything all whole entire full complete every each todo toda todos todas cada completo completa "
              "completos completas entero entera enteros enteras")  # fmt: skip
_AFTER_NOUN = _words("completo completa completos completas entero entera enteros enteras")
# Words for the memory itself: enough with a word for "all" ("everything stored", "toda la memoria").
_NOUNS = _words("memory memories memoria memorias recuerdos")
# Of these a participle counts when it ends the ask or a word for memory or a preposition follows it
# ("all the stored context", "todo lo guardado del proyecto"; not "all stored procedures").
_PARTICIPLES = _words(
    "stored saved remembered recalled recorded memorised memorized noted kept guardado guardada guardados guardadas "
    "guardaste guardamos guardo almacenado almacenada almacenados almacenadas anotado anotada anotados anotadas "
    "anotaste registrado registrada registrados registradas recordado recordada recordados recordadas"
)
# What a memory holds, by name: "all remembered decisions", "todo el conocimiento guardado".
_CONTENTS = _words(
    "decision decisions preference preferences convention conventions learnings lessons facts knowledge bug bugs "
    "bugfixes decisiones preferencias convenciones aprendizajes lecciones conocimiento bugs errores"
)
_AFTER_PARTICIPLE = (
    _CONTENTS
    | _ALL
    | _words(
        "context notes memories memory history knowledge observation observations entries about on in from for of so by "
        "over during since across until up these this last regarding concerning contexto notas memoria memorias historial recuerdos "
        "observacion observaciones entradas sobre de del en desde por para hasta durante estos estas este esta"
    )
)
# A noun for the memory is the thing asked for only when nothing but these follows it ("the full memory
# for this repo", "all context, please"); another noun after it makes it that noun's modifier ("full
# memory encryption", "full context propagation"), and so does "de" after a noun in Spanish ("cifrado de
# memoria completa", "la propagacion del contexto completo").
_HEAD_NOUNS = _words("memory memories context history notes memoria memorias contexto historial notas recuerdos")
_AFTER_HEAD = _words(
    "for of on about from in into to you you've youve we we've i that which so and or please now dump again too "
    "here there with at across over since until before regarding concerning de del sobre en para desde que y o por "
    "favor ya ahora aca aqui hasta acerca tuya tuyo"
)
_VERBS = _words(
    "holds has have contains keeps says covers includes is are was tiene tienen contiene guarda dice es son"
)
# Words that may mean the memory or something else ("the full context of the function", "recall the
# fields"): they count only when the prompt's memory need is explicit_user_recall too.
_WEAK = _words(
    "remember recall context history note notes observation observations recuerdas recuerdes recuerda recuerdame recordar recorda "
    "recordas recordame recuerden acuerdas acuerdes acuerdate historial contexto nota notas observacion observaciones"
)
# Words that ask for knowledge as much as for memory: they count only with a word for the user or the
# project, and when the memory need agrees.
_KNOW = _words("know knows knew sabes sabemos sabias conoces")
# What may stand between "all" and the memory word of one ask: "everything you've got stored",
# "todo lo que tengas guardado", "toda la memoria que tienes".
_BETWEEN = (
    _words(
        "the a an of that that's thats what's whats which what you you've youve we we've weve i i've ive have has had got get keep still ever so "
        "far already currently previously your our my in on about for there is are it its this these those el la los "
        "las lo un una que de del tu tus su sus nuestro nuestra nuestros nuestras mi mis en has hemos han habia tienes "
        "tengas tenes tiene tenemos hay haya hayas hayamos tuviste me te nos se sobre ya hasta ahora aun and y "
        "single thing things cosa cosas"
    )
    | _ALL
    | _CONTENTS
)
_ANCHOR = (
    r"\b(?:about|on|of|regarding|sobre|de|acerca de) (?:me|mi)\b|\b(?:us|our|ours|we|my|this (?:project|repo|"
    r"repository|codebase|app|service|team)|project|repo|repository|codebase|nosotros|nuestr[oa]s?|mis?|proyecto|"
    r"repositorio|codigo|equipo)\b"
)
# The computer's memory, not the assistant's.
_MACHINE = (
    r"\b(?:free|frees|freeing|allocat\w*|leak\w*|usage|heap|ram|garbage|oom|profil\w*|footprint|barriers?|maps?|"
    r"mapped|mapping|address\w*|pages?|paging|segments?|bandwidth|libera\w*|reservad[ao]s?|reservar|"
    r"reserva (?:el|la|un|una)|consumo|fugas?|ocupa|"
    r"barreras?|mapas?|direccion\w*|paginas?|segmentos?)\b"
)
# A reminder or an instruction that merely contains the words.
_REMINDER = (
    r"\bremember (?:to|that|not)\b|\bremind (?:me|us) to\b|\b(?:don't|dont|do not) forget\b|"
    r"\b(?:everything|all) (?:must|should|has to|needs to|goes|is|gets)\b|"
    r"\b(?:recuerda|recorda|acuerdate|acordate|recuerden)(?: de)? (?:que\b|no\b|(?!todo|toda|lo\b)\w+(?:ar|er|ir)\b)|"
    r"\bno (?:te )?olvides\b"
)
# A question about the words themselves, not a request to use them.
_ABOUT_WORDS = (  # {w}: the words, escaped
    r"\bwhat (?:is|are|does) (?:a |an |the )?(?:\w+ )?{w}|\bhow (?:large|big|long|many|much|wide)\b.*{w}|"
    r"{w}(?: \w+)? (?:window|size|length|limit|tokens?)\b|{w}.*\b(?:mean|means|meaning|stand for|refer to)\b|"
    r"\b(?:explain|define|definition of|meaning of|difference between)\b.*{w}|{w} (?:of|in) (?:the|this|a|an) "
    r"(?:model|llm|api|process|kernel|docs|documentation)\b|"
    r"\bque (?:es|son|significa|quiere decir|hace|hacen) (?:una? |el |la |los |las )?(?:\w+ )?{w}|\bpara que sirve\b.*{w}|\bcuan(?:to|ta|tos|tas)\b.*{w}|"
    r"{w}.*\b(?:significa|quiere decir)\b|\b(?:explica\w*|define|definicion de|significado de)\b.*{w}|"
    r"\b(?:ventana|tamano|limite) de(?: \w+)? {w}|\b(?:cual|que) es (?:el|la) (?:tamano|limite|longitud|capacidad)\b.*{w}|\b(?:length|size|limit|capacity) of\b.*{w}|"
    r"{w} (?:de|en) (?:la|el|un|una) (?:modelo|documentacion|api|proceso)\b|{w}.*\btokens?\b|\b(?:an?|un|una) "
    r"(?:model|llm|modelo) (?:with|con) (?:a |an |un |una )?{w}|{w}(?: of| de)? \d"
)


_ABOUT_THEM = "is in a question about the words themselves"
_MACHINE_MEMORY = "is about the computer's memory"
_NOT_THE_MEMORY = (_ABOUT_THEM, _MACHINE_MEMORY)


class Recall:
    """The answer, and why, in words `classify --explain` prints."""

    __slots__ = ("about_words", "phrase", "unlocks", "why")

    def __init__(self, unlocks: bool, why: str, phrase: str | None = None) -> None:
        self.unlocks = unlocks
        self.why = why
        self.phrase = phrase  # the policy phrase, or the words of the ask, that decided
        self.about_words: list[str] = []  # words found in a question about them, or about the computer's memory


def said(prompt: str) -> str:
    """What the prompt itself says, folded: no code, no quotes, lines kept (a line ends a clause)."""
    if len(prompt) > HEAD + TAIL:
        prompt = prompt[:HEAD] + "\n" + prompt[-TAIL:]
    return _SPACES.sub(" ", strip_accents(_SHOWN.sub(" ", prompt).casefold()))


def asks_for_everything(prompt: str, phrases: list[str], verdict: Verdict) -> Recall:
    """Whether `prompt` asks for everything remembered; `verdict` is its class by patterns and model."""
    text = said(prompt)
    refused: str | None = None
    about: list[str] = []
    for phrase in phrases:
        wanted = " ".join(strip_accents(phrase.casefold()).split())
        for match in re.finditer(r"(?<![\w./-])" + re.escape(wanted) + r"(?![\w/-]|\.\w)", text):
            guard = _guard(text, match.start(), match.end(), wanted) or _modifier(text, match.start(), match.end())
            if guard is None and _KNOW.intersection(wanted.split()) and not _anchored(text, match.end()):
                guard = "asks what is known, of nothing of the user's or the project's"
            if guard is None:
                return Recall(True, f'the phrase "{phrase}"', phrase)
            if guard in _NOT_THE_MEMORY or guard.startswith("names "):
                about.append(wanted)
            refused = refused or f'"{phrase}" {guard}'
    ask = None
    for start, end, words, strength in _asks(text):
        guard = _guard(text, start, end, words) or _modifier(text, start, end)
        if guard is None and strength == "know" and not _anchored(text, end):
            guard = "asks what is known, of nothing of the user's or the project's"
        if guard is not None:
            if guard in _NOT_THE_MEMORY or guard.startswith("names "):
                about.append(words)
            refused = refused or f'"{words}" {guard}'
            continue
        if strength == "strong":
            return Recall(True, f'asks for all of the memory ("{words}")', words)
        if verdict.need == CLASS:
            return Recall(True, f'asks for all of it ("{words}") and the memory need is {CLASS} ({_by(verdict)})',
                          words)  # fmt: skip
        ask = ask or words
    if ask is not None:
        refused = refused or f'"{ask}" is said, but the memory need is {verdict.need} ({_by(verdict)}), not {CLASS}'
    answer = Recall(False, refused or "no phrase of the policy, and no ask for everything remembered")
    answer.about_words = about
    return answer


def judge(prompt: str, needs: dict, phrases: list[str],  # type: ignore[type-arg]
          requires: dict[str, list[str] | None] | None = None) -> tuple[Verdict, Recall]:  # fmt: skip
    """The prompt's memory need and its recall, consistent: a prompt that asks for everything
    remembered is `explicit_user_recall` whatever else matched."""
    from governor.engine.classify import classify

    verdict = classify(prompt, needs, requires)  # requires: classify.required of each pattern
    recall = asks_for_everything(prompt, phrases, verdict)
    if recall.unlocks and verdict.need != CLASS and CLASS in needs["classes"]:
        was = verdict
        verdict = Verdict(CLASS, None, recall.phrase, via="recall")
        verdict.model = was.model
        recall.why += f"; the rules alone gave {was.need} ({_by(was)})"
    elif verdict.need == CLASS and verdict.via == "pattern" and _within(verdict.matched or "", recall.about_words):
        # "how large is the full context of this model?": the words the class matched are not about the memory
        verdict = Verdict(needs["default"], None, verdict.matched, via="recall")
        recall.why += f"; so the memory need is the default ({needs['default']}), not {CLASS}"
    return verdict, recall


def _within(matched: str, about: list[str]) -> bool:
    return bool(matched) and any(matched in words or words in matched for words in about)


def _by(verdict: Verdict) -> str:
    if verdict.via == "model" and verdict.model is not None and verdict.model.best is not None:
        return f"by the model, {verdict.model.best[1]:.2f}"
    if verdict.via == "pattern":
        return f"by the pattern matching {verdict.matched!r}"
    return f"by {verdict.via}"


def _asks(text: str) -> list[tuple[int, int, str, str]]:
    """Each word for "all of it" near a word for the memory, strongest first: (start, end, the
    words, "strong" | "weak" | "know")."""
    tokens = [(m.start(), m.end(), m.group(0).strip(".'")) for m in _TOKEN.finditer(text)]
    words = [w if _WORDLIKE.fullmatch(w) else "" for _, _, w in tokens]
    found = []
    for i, word in enumerate(words):
        if word not in _ALL:
            continue
        first = max(0, i - WINDOW)
        if _short_sentence(text, tokens[i][0]):  # "... stored about us? I want all of it": reach back a sentence
            first = min(first, _token_at(tokens, _sentence_start(text, _sentence_start(text, tokens[i][0]) - 1)))
        for j in range(first, min(len(words), i + WINDOW + 1)):
            strength = _strength(words, j) if j != i else None
            lo, hi = min(i, j), max(i, j)
            if strength is None or (j > i and word in _AFTER_NOUN):
                continue  # no word for the memory; "el payload completo guardado": completo is the payload's
            if _CLAUSE_END.search(text, tokens[lo][0], tokens[hi][1]):
                if not _answers(text, tokens, j, i):
                    continue  # the two words are in different sentences
            elif not all(w in _BETWEEN or _strength(words, k) for k, w in enumerate(words[lo + 1 : hi], lo + 1)):
                continue  # "all stored procedures", "the whole app runs out of memory": "all" is another thing's
            found.append((tokens[lo][0], tokens[hi][1], text[tokens[lo][0] : tokens[hi][1]], strength))
    found.sort(key=lambda ask: ("strong", "weak", "know").index(ask[3]))
    return found


def _answers(text: str, tokens: list[tuple[int, int, str]], j: int, i: int) -> bool:
    """ "What have you stored about us? Give me everything.": the word for "all" is in a short
    sentence (or the first clause of one) right after the memory word's."""
    if j > i:
        return False
    ends = [m.start() for m in _CLAUSE_END.finditer(text, tokens[j][1], tokens[i][0])]
    return len(ends) == 1 and _short_sentence(text, tokens[i][0])


def _sentence_start(text: str, at: int) -> int:
    found = [m.end() for m in _CLAUSE_END.finditer(text, 0, max(0, at))]
    return found[-1] if found else 0


def _short_sentence(text: str, at: int) -> bool:
    start = _sentence_start(text, at)
    sentence = _CLAUSE_END.split(text[start:])[0].split(",")[0]
    return start > 0 and len(sentence.split()) <= ANSWER_WORDS


def _token_at(tokens: list[tuple[int, int, str]], at: int) -> int:
    return next((k for k, token in enumerate(tokens) if token[1] > at), len(tokens))


def _strength(words: list[str], j: int) -> str | None:
    word = words[j]
    if word in _NOUNS:
        return "strong"
    if word in _PARTICIPLES:
        after = words[j + 1] if j + 1 < len(words) else ""
        return "strong" if not after or after in _AFTER_PARTICIPLE else None
    if word in _WEAK:
        return "weak"
    return "know" if word in _KNOW else None


def _modifier(text: str, start: int, end: int) -> str | None:
    """Why the words at text[start:end] name another thing ("full memory encryption"), or None."""
    said = [w.strip(".'") for w in text[start:end].split()]
    if not said or (said[-1] not in _HEAD_NOUNS and said[0] not in _HEAD_NOUNS):
        return None
    after = _CLAUSE_END.split(text[end:])[0].split(",")[0].split()
    follower = after[0].strip(".'") if after else ""
    if said[-1] in _HEAD_NOUNS and follower and _WORDLIKE.fullmatch(follower) and not _may_follow(follower):
        return f'names a "{said[-1]} {follower}", not the memory'
    before = _CLAUSE_END.split(text[:start])[-1].split()
    noun = next((w for w in said if w in _HEAD_NOUNS), "")
    if said[0] == noun and len(before) >= 2 and before[-1] in ("de", "del"):
        owner = before[-2]
        if _WORDLIKE.fullmatch(owner) and owner not in _BETWEEN and owner not in _ALL and not _strength([owner], 0):
            return f'names the "{owner} {before[-1]} {noun}", not the memory'
    return None


def _may_follow(word: str) -> bool:
    """A word after the memory noun that leaves it the thing asked for: a preposition, a pronoun, a
    participle or a verb ("our memory holds", "the memories tied to", "los recuerdos ligados a")."""
    return (
        word in _AFTER_HEAD
        or word in _ALL
        or word in _PARTICIPLES
        or word in _VERBS
        or word.endswith(("ed", "ado", "ada", "ados", "adas", "ido", "ida", "idos", "idas"))
    )


def _anchored(text: str, end: int) -> bool:
    """Whether what follows the words in their clause names the user, the team or the project."""
    return bool(re.search(_ANCHOR, _CLAUSE_END.split(text[end : end + 200])[0]))


def _clause_around(text: str, start: int, end: int) -> str:
    before = _CLAUSE_END.split(text[max(0, start - 200) : start])[-1]
    after = _CLAUSE_END.split(text[end : end + 200])[0]
    return before + text[start:end] + after


def _guard(text: str, start: int, end: int, words: str) -> str | None:
    """Why the words at text[start:end] are no ask for the memory, or None."""
    clause_before = _CLAUSE_END.split(text[max(0, start - 120) : start])[-1]
    negation = re.search(_NEGATION, " ".join(clause_before.split()[-WINDOW:]))
    if negation:
        return f"is negated ({negation.group(0)!r})"
    clause = _clause_around(text, start, end)
    if re.search(_REMINDER, clause):
        return "is a reminder or an instruction, not an ask"
    if re.search(_MACHINE, clause):
        return _MACHINE_MEMORY
    if re.search(_ABOUT_WORDS.replace("{w}", re.escape(words)), clause):  # re caches the compiled form
        return _ABOUT_THEM
    return None
