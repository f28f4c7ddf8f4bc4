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

from governor.engine.classify import HEAD, TAIL, Verdict, strip_accents
from governor.engine.patterns import Lazy, compiled, escape

TYPE_CHECKING = False
if TYPE_CHECKING:
    from re import Match

CLASS = "explicit_user_recall"
WINDOW = 6  # words between the word for "all" and the word for the memory
WIDE = 15  # the same, within one clause, when the memory need is explicit_user_recall too
ANSWER_WORDS = 6  # "What have you stored? Give me all of it.": the longest such answer

# Each pattern is built when first used (governor.engine.patterns): the guards run only on a prompt
# that asks, and compiling them all would cost every UserPromptSubmit a few milliseconds.
# What a prompt shows rather than says: code, and quoted text.
_SHOWN = Lazy(
    r"```[\s\S]*?(?:```|\Z)|`[^`\n]{0,500}`|\"[^\"\n]{0,500}\"|“[^”\n]{0,500}”|«[^»\n]{0,500}»"
    r"|(?<!\w)'[^'\n]{0,500}'(?!\w)"
)
_NEGATION = Lazy(
    r"\b(?:not|no|never|without|nor|dont|don't|doesnt|doesn't|isnt|isn't|aren't|won't|shouldn't|shouldnt|mustn't|"
    r"can't|cannot|avoid|skip|rather than|instead of|nunca|sin|ni|tampoco|jamas|nada de|evita|evitar|saltate|salta|"
    r"saltar|saltarse|omite|omitir|pasa de|hold off|no ahora|not now|not yet|todavia no|aun no)\b"
)
_CLAUSE_END = Lazy(r"[.!?;:\n]")
_SENTENCE_END = Lazy(r"[.!?\n]")
_SPACES = Lazy(r"[^\S\n]+")
# A token of the prompt; a word is one made of letters only (`full_memory.py`, `--all-context` are not).
_TOKEN = Lazy(r"[^\s,;:!?¿¡()\[\]{}]+")
_WORDLIKE = Lazy(r"[a-zñ']+")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words for "all of it". Spanish puts some after the noun: "la memoria completa".
_ALL = _words("everything all whole entire full complete every each todo toda todos todas cada completo completa "
              "completos completas entero entera enteros enteras totalidad completito completita integramente integro "
              "integra integros integras completico completica entirety")  # fmt: skip
_AFTER_NOUN = _words(
    "completo completa completos completas entero entera enteros enteras completito completita completico completica"
)
# "el volcado completo de la memoria", "the full dump of your memory": the word for "all" is the dump's,
# and the dump is of the memory.
_ARTICLES = _words("la el los las tu tus su sus")  # "imprime entera la memoria guardada"
_DUMPS = _words("volcado dump listado contenido repaso copia historial conjunto")
# Words for the memory itself: enough with a word for "all" ("everything stored", "toda la memoria").
_NOUNS = _words("memory memories memoria memorias recuerdos")
# Of these a participle counts when it ends the ask or a word for memory or a preposition follows it
# ("all the stored context", "todo lo guardado del proyecto"; not "all stored procedures").
_PARTICIPLES = _words(
    "stored saved remembered recalled recorded memorised memorized noted kept guardado guardada guardados guardadas "
    "guardaste guardamos guardo almacenado almacenada almacenados almacenadas anotado anotada anotados anotadas "
    "anotaste registrado registrada registrados registradas recordado recordada recordados recordadas memorizado "
    "memorizada memorizados memorizadas memorizaste apuntado apuntada apuntados apuntadas apuntaste guardando "
    "apuntando anotando almacenando accumulated gathered collected stashed squirreled hoarded amassed acumulado "
    "acumulada acumulados acumuladas acumulaste recopilado recopilada recopilados recopilaste learned learnt persisted aprendido aprendida aprendidos aprendidas aprendiste "
    "aprendimos persistido persistida persistidos persistidas"
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
        "observacion observaciones entradas sobre de del en desde por para hasta durante estos estas este esta tu "
        "usted vos ustedes stuff things info information cosas informacion abt bout"
    )
)
# A noun for the memory is the thing asked for only when nothing but these follows it ("the full memory
# for this repo", "all context, please"); another noun after it makes it that noun's modifier ("full
# memory encryption", "full context propagation"), and so does "de" after a noun in Spanish ("cifrado de
# memoria completa", "la propagacion del contexto completo").
_HEAD_NOUNS = _words("memory memories context history notes memoria memorias contexto historial notas recuerdos base")
_AFTER_HEAD = _words(
    "for of on about from in into to you you've youve we we've i that which so and or please now dump again too "
    "here there with at across over since until before regarding concerning de del sobre en para desde que y o por "
    "favor ya ahora aca aqui hasta acerca tuya tuyo porfa porfis pls plz xfa asap store bank dl d"
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
        "single thing things cosa cosas project repo u ur ya q k ido tenido hecho literally absolutely absolutamente "
        "set collection list lot entries items entradas tenias tenia teniamos tengai tenis tenga tengan contents content "
        "contenido contenidos almacen inventory brain dump works readout rundown overview stuff info informacion"
    )
    | _ALL
    | _CONTENTS
)
_KNOWN = (
    _ALL | _NOUNS | _PARTICIPLES | _AFTER_PARTICIPLE | _HEAD_NOUNS | _AFTER_HEAD | _VERBS | _WEAK | _KNOW | _BETWEEN
)
_ANCHOR = Lazy(
    r"\b(?:about|on|of|regarding|sobre|de|acerca de) (?:me|mi)\b|\b(?:past|previous|earlier|prior|last) sessions?\b|"
    r"\bsesion(?:es)? (?:pasadas?|anteriores?|previas?)\b|\b(?:us|our|ours|we|my|this (?:project|repo|"
    r"repository|codebase|app|service|team)|project|repo|repository|codebase|nosotros|nuestr[oa]s?|mis?|proyecto|"
    r"repositorio|codigo|equipo)\b"
)
# The computer's memory, not the assistant's: words that say so anywhere in the clause, and words that
# say so only beside the words of the ask ("the memory map", "las paginas de memoria"; not "the same
# page", "el repo de mapas").
_MACHINE = Lazy(
    r"\b(?:allocat\w*|leak\w*|heap|ram|garbage|oom|malloc|valgrind|swap|footprint|\d+ ?(?:[kmgt]i?b|gigs?)|"
    r"fugas?|consumo|consume|consumes|ocupa)\b"
)
_MACHINE_NEAR = Lazy(
    r"\b(?:free|frees|freeing|usage|profil\w*|barriers?|maps?|mapped|mapping|address\w*|pages?|paging|"
    r"segments?|bandwidth|libera\w*|reservad[ao]s?|reservar|reserva|barreras?|mapas?|direccion\w*|paginas?|"
    r"segmentos?|uso|objects?|buffers?|arrays?|variables?|threads?|process|processes|objetos?|procesos?|hilos?)\b"
)
NEAR = 3  # words either side of the ask that _MACHINE_NEAR looks at
# A reminder or an instruction that merely contains the words.
_REMINDER = Lazy(
    r"\bremember (?:to|that|not)\b|\bremind (?:me|us|yourself)(?: \w+){0,3} to\b|"
    r"\brecuerdame (?:manana|luego|mas tarde|el (?:lunes|martes|miercoles|jueves|viernes|sabado|domingo))\b|\b(?:don't|dont|do not) forget\b|"
    r"\bmake a note\b|\btake (?:a )?note\b|\btoma(?:te)? nota\b|"
    r"\b(?:for|till|until|by) (?:next time|later|the future|future sessions|tomorrow)\b|\bnext time\b|"
    r"\bgoing forward\b|\bfrom now on\b|\b(?:so|that) you (?:can|could|will|'ll) (?:recall|remember|use) (?:it|them|this)\b|"
    r"\bproxima vez\b|\bpara (?:mas )?adelante\b|\bde ahora en adelante\b|\bpara (?:el )?futuro\b|"
    r"\bpara que (?:lo|la|los|las) (?:tengas|recuerdes|uses)\b|"
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


# An instruction to save, not to recall, that opens the clause ("please store the whole context of ...").
_SAVE = Lazy(
    r"(?:(?:please|pls|plz|now|ok|okay|and|also|then|can you|could you|would you|por favor|porfa|ahora|y|tambien) )*"
    r"(?:store|save|write down|jot down|record|memori[sz]e|guarda|guardate|guardalo|apunta|apuntate|apuntalo|anota|"
    r"anotate|anotalo|memoriza|memorizate|registra|(?:add|put|agrega|agregale|anade|anadele|mete|pon|incluye|suma)"
    r"(?: this| esto| eso)? (?:to|in|into|a|en) (?:your|tu|la|the) (?:memory|memoria))\b"
)
# A question of opinion or design about loading memory, and another agent's memory ("all of its stored
# memories", "their full context"), are not the user asking for theirs.
_OPINION = Lazy(
    r"\b(?:is it|would it be|isn't it|is that) (?:a |an )?(?:good|bad|wise|smart|sensible|terrible|great|better|worse)\b|"
    r"\bshould (?:an?|the|my|our) (?:agent|assistant|model|llm|bot)s?\b|\bpros (?:and|y) (?:cons|contras)\b|"
    r"\bhow (?:does|do|is|are) (?:your|the|its|their|an?) [\w' -]{0,30}\b(?:memory|memories|context|store)\b"
    r"[\w' -]{0,20}\b(?:work|works|organi[sz]ed|structured)\b|"
    r"\bcomo (?:funciona|se organiza)n? (?:tu |la |su |el |vuestra )?(?:memoria|contexto|almacen)\b|"
    r"\b(?:do|does|did) you (?:store|keep|save|record|remember)\b.*\bor (?:only|just)\b|"
    r"\b(?:guardas|almacenas|recuerdas|guardan) (?:todo|toda)\b.*\bo (?:solo|solamente)\b|"
    r"\b(?:es|seria) (?:una )?(?:buena|mala) idea\b|\bventajas y desventajas\b|\bdeberia (?:un|el) (?:agente|asistente|modelo)\b"
)
# What the words name when another thing stands beside them: "the full history of this branch".
_OTHER_THING = Lazy(
    r"\b(?:branch|branches|commits?|git|rama|ramas|browser|navegador|shell|terminal|file|archivo|fichero|table|"
    r"tabla|database|spreadsheet|hoja|form|forms|formulario|formularios|localstorage|sessionstorage|cookies?|redux)\b"
)
# Verbs that destroy or rewrite what they name: "wipe the full history", "borra todo el historial".
_UNDOING = Lazy(
    r"\b(?:wipe|delete|clear|erase|purge|remove|drop|reset|rewrite|squash|truncate|borra|borrar|elimina|eliminar|"
    r"limpia|limpiar|vacia|vaciar|resetea|reescribe)\b"
)
# A question asks for the memory only in the forms a request takes ("can you load ...?", "what have you
# saved ...?", "¿me pasas ...?"); any other question with the words is about them ("what happens to your
# context window if the full project memory is bigger than it?", "should a tool that injects all saved
# memories be opt-in?").
_REQUEST_FORM = Lazy(
    r"\b(?:can|could|would|will|wont|won't|wouldn't|may|might) (?:you|u|ya)\b|\bwould you mind\b|\bany chance\b|"
    r"\bwhat (?:have|do|did|else) (?:you|u)\b|\bwhat(?:'s| is) (?:in|stored|saved|kept)\b|\bhow about\b|"
    r"\bwhy don'?t you\b|\bmind (?:\w+ing)\b|\bis there (?:any )?way\b|\bis it possible\b|\bare you able\b|"
    r"\bdo you mind\b|\bes posible\b|"
    r"\b(?:puedes|puede|pueden|podrias|podria|podrian|podes|podis|podei|quieres|querrias|te importa|le importa|seria (?:tan amable|"
    r"posible))\b|\b(?:me|nos) (?:das|da|pasas|pasa|pasan|muestras|muestra|traes|trae|cargas|carga|ensenas|lees|"
    r"recuerdas|haces|sacas|dices|cuentas|repasas|listas|echas|tiras|compartes|comparte|mandas|envias|ensenas)\b|\bque (?:tienes|tiene|tenes|has|ha|recuerdas|"
    r"recuerda|sabes|sabe|guardaste|guardo|tenias|hay)\b"
)
_OTHERS = Lazy(r"\b(?:its|their|theirs|agent's|agents'|model's|bot's|his|her)\b")
# "... all your saved notes, but please don't": the ask withdrawn later in its sentence.
_WITHDRAWN = Lazy(
    r"\b(?:but|pero)\b.*\b(?:don'?t|do not|no lo hagas|no hace falta|no|never ?mind|forget it|olvidalo|mejor no|da igual)\b"
)
# A hypothesis, a design discussion or a coding task that contains the words: "if you loaded your entire
# memory, how much ...", "estamos disenando la herramienta ...", "escribe una funcion que cargue todo ...".
_NOT_ASKED = Lazy(
    r"\bif (?:you|i|we|it|an? \w+) (?:\w+ed|were|was|had)\b|\bwhat if\b|\bimagine\b|\bsuppose\b|"
    r"\bi was (?:going|about) to\b|\biba a\b|\bpensaba (?:pedir|en)\b|"
    r"\b(?:para que|so that|so it) (?:\w+ )?(?:guarde|cargue|almacene|restaure|saves?|stores?|loads?|keeps?|restores?)\b|"
    r"\bsi \w+(?:aras|ases|ieras|ieses)\b|\bsupon\w*\b|\bimagina\w*\b|"
    r"\b(?:we're|we are|i'm|i am|estamos|estoy) (?:designing|building|writing|implementing|disenando|construyendo|"
    r"escribiendo|implementando)\b|\b(?:antes de|before) (?:volcar|cargar|loading|dumping)\b|"
    r"\b(?:deberia|should) (?:it |we |i |the tool |la herramienta )?(?:ask|prompt|warn|confirm|pedir|avisar|confirmar)\b|"
    r"\b(?:write|implement|create|add|code|build|refactor|escribe|implementa|crea|anade|programa) (?:me )?"
    r"(?:a |an |the |una? |el |la )?(?:\w+ )?(?:function|script|method|class|test|endpoint|query|job|funcion|metodo|"
    r"clase|consulta|prueba)\b"
)
# Key words a typo should not hide ("memroy", "memria", "evrything", "rememebr"): one edit away, same first
# letter. Words that are one edit from a real word ("context"/"contest") are not among them.
_TYPO_TARGETS = ("memory", "memories", "memoria", "memorias", "everything", "remember", "remembered", "recuerdos",
                 "guardado", "almacenado", "almacenada")  # fmt: skip
_SHORT = {"tdo": "todo", "tod": "todo", "evrythng": "everything", "evthg": "everything", "mem": "memory"}

_MARK = "\x00"  # stands for the words of the ask in _ABOUT
_ABOUT = Lazy(_ABOUT_WORDS.replace("{w}", _MARK))

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


def _wanted(phrase: str) -> str:
    return " ".join(strip_accents(phrase.casefold()).split())


def phrase_pattern(wanted: str) -> str:
    """The pattern of a policy phrase (folded): its words whole, not inside a flag or a file name."""
    return r"(?<![\w./-])" + escape(wanted) + r"(?![\w/-]|\.\w)"


def sources(needs: dict, phrases: list[str]) -> list[tuple[str, int]]:  # type: ignore[type-arg]
    """Every (pattern, flags) a prompt's decision may build for this policy: its memory-need
    patterns, its phrases, and the fixed patterns of classify, this module and need_model."""
    from governor.engine import need_model  # noqa: F401  # its patterns are listed when imported
    from governor.engine.classify import form
    from governor.engine.patterns import SHIPPED

    found = [form(p) for need in needs["classes"].values() for p in need.get("patterns", [])]
    found += [(phrase_pattern(_wanted(p)), 0) for p in phrases]
    return [*found, *SHIPPED]


def asks_for_everything(prompt: str, phrases: list[str], verdict: Verdict) -> Recall:
    """Whether `prompt` asks for everything remembered; `verdict` is its class by patterns and model."""
    text = said(prompt)
    refused: str | None = None
    about: list[str] = []
    for phrase in phrases:
        wanted = _wanted(phrase)
        if wanted not in text:
            continue  # no match can be found: its pattern is not built
        for match in compiled(phrase_pattern(wanted)).finditer(text):
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
    if verdict.need == CLASS:
        for start, end, words in _wide_asks(text):
            guard = _guard(text, start, end, words) or _modifier(text, start, end)
            if guard is None:
                return Recall(True, f'asks for all of it ("{words}") and the memory need is {CLASS} ({_by(verdict)})',
                              words)  # fmt: skip
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
    tokens = [_token(m) for m in _TOKEN.finditer(text)]
    words = [_spelled(w) if _WORDLIKE.fullmatch(w) else "" for _, _, w in tokens]
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
            before_noun = j == i + 2 and words[i + 1] in _ARTICLES and strength == "strong"
            if strength is None or (
                j > i and word in _AFTER_NOUN and not (i and words[i - 1] in _DUMPS) and not before_noun
            ):
                continue  # no word for the memory; "el payload completo guardado": completo is the payload's
            if _CLAUSE_END.search(text, tokens[lo][0], tokens[hi][1]):
                if not _answers(text, tokens, j, i):
                    continue  # the two words are in different sentences
            elif not all(
                w in _BETWEEN or w in _PARTICIPLES or _strength(words, k)
                for k, w in enumerate(words[lo + 1 : hi], lo + 1)
            ):
                continue  # "all stored procedures", "the whole app runs out of memory": "all" is another thing's
            found.append((tokens[lo][0], tokens[hi][1], text[tokens[lo][0] : tokens[hi][1]], strength))
    found.sort(key=lambda ask: ("strong", "weak", "know").index(ask[3]))
    return found


def _token(match: Match[str]) -> tuple[int, int, str]:
    """A token without the periods and apostrophes around it: "memory." ends before its period."""
    raw = match.group(0)
    word = raw.strip(".'")
    start = match.start() + len(raw) - len(raw.lstrip(".'"))
    return start, start + len(word), word


def _wide_asks(text: str) -> list[tuple[int, int, str]]:
    """A word for "all of it" and a noun that can only mean the memory (memory, recuerdos; not
    context or notes) within WIDE words of one clause, whatever stands between: "go into
    your long term memory thing for this project and just spit out literally everything in there"."""
    tokens = [_token(m) for m in _TOKEN.finditer(text)]
    words = [_spelled(w) if _WORDLIKE.fullmatch(w) else "" for _, _, w in tokens]
    found = []
    for i, word in enumerate(words):
        if word not in _ALL or word in _AFTER_NOUN:  # "el contenedor entero ... por memoria": the container's
            continue
        for j in range(max(0, i - WIDE), min(len(words), i + WIDE + 1)):
            if j == i or words[j] not in _NOUNS:  # a participle needs its neighbours: "las busquedas guardadas"
                continue
            lo, hi = min(i, j), max(i, j)
            if not _CLAUSE_END.search(text, tokens[lo][0], tokens[hi][1]):
                found.append((tokens[lo][0], tokens[hi][1], text[tokens[lo][0] : tokens[hi][1]]))
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
    before = words[j - 1] if j else ""
    if word == "base" and (before == "knowledge" or (words[j + 1 : j + 2] == ["de"] and words[j + 2 : j + 3]
                                                      and words[j + 2].startswith("conocimiento"))):  # fmt: skip
        return "strong"  # "the whole knowledge base you keep", "toda la base de conocimiento"
    if word == "yourself" and before in ("remind", "refresh", "reload"):
        return "strong"  # "remind yourself of everything we worked out"
    if word in _PARTICIPLES:
        after = words[j + 1] if j + 1 < len(words) else ""
        return "strong" if not after or after in _AFTER_PARTICIPLE else None
    if word in _WEAK:
        # "the notes from our past sessions", "las notas de nuestras sesiones anteriores": the memory itself
        following = words[j + 1 : j + 5]
        if following[:1] and following[0] in ("of", "from", "de", "del") and {"sessions", "sesiones"} & set(following):
            return "strong"
        # "all of the notes you keep", "todas las notas que guardas": the ones the assistant keeps
        if following[:2] in (["you", "keep"], ["you", "hold"], ["you", "store"], ["you", "saved"], ["you", "kept"],
                             ["you've", "saved"], ["you've", "kept"], ["que", "guardas"], ["que", "tienes"]):  # fmt: skip
            return "strong"
        return "weak"
    return "know" if word in _KNOW else None


def _spelled(word: str) -> str:
    """The key word a typo stands for ("memroy" -> "memory"), or the word itself."""
    if word in _SHORT:
        return _SHORT[word]
    if len(word) < 5 or word in _KNOWN:
        return word
    for target in _TYPO_TARGETS:
        if target[0] == word[0] and abs(len(target) - len(word)) <= 1 and _one_edit(word, target):
            return target
    return word


def _one_edit(a: str, b: str) -> bool:
    """One insertion, deletion, substitution or swap of neighbours turns a into b."""
    if len(a) == len(b):
        diff = [k for k in range(len(a)) if a[k] != b[k]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
                                  and a[diff[1]] == b[diff[0]])  # fmt: skip
    short, long = (a, b) if len(a) < len(b) else (b, a)
    k = next((k for k in range(len(short)) if short[k] != long[k]), len(short))
    return short[k:] == long[k + 1 :]


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
    return bool(_ANCHOR.search(_CLAUSE_END.split(text[end : end + 200])[0]))


def _clause_around(text: str, start: int, end: int) -> str:
    before = _CLAUSE_END.split(text[max(0, start - 200) : start])[-1]
    after = _CLAUSE_END.split(text[end : end + 200])[0]
    return before + text[start:end] + after


def _questioned(text: str, start: int, end: int) -> bool:
    """Whether the words are in a question that is not in a request's form."""
    stop = _CLAUSE_END.search(text, end)
    if stop is None or stop.group(0) != "?":
        return False
    opening = _SENTENCE_END.split(text[max(0, start - 300) : start])[-1]
    return not _REQUEST_FORM.search(opening + text[start:end])


def _guard(text: str, start: int, end: int, words: str) -> str | None:
    """Why the words at text[start:end] are no ask for the memory, or None."""
    clause_before = _CLAUSE_END.split(text[max(0, start - 120) : start])[-1]
    negation = _NEGATION.search(" ".join(clause_before.split()[-WINDOW:]))
    if negation:
        return f"is negated ({negation.group(0)!r})"
    clause = _clause_around(text, start, end)
    if _REMINDER.search(clause):
        return "is a reminder or an instruction, not an ask"
    if _MACHINE.search(clause):
        return _MACHINE_MEMORY
    near = " ".join([*clause_before.split()[-NEAR:], text[start:end], *text[end : end + 80].split()[:NEAR]])
    if _MACHINE_NEAR.search(near):
        return _MACHINE_MEMORY
    if _UNDOING.search(" ".join(clause_before.split()[-3:])) or _OTHER_THING.search(near):
        return "names another thing, or undoes it"
    if _NOT_ASKED.search(clause):
        return "is a hypothesis, a design question or a coding task, not an ask"
    if _SAVE.match(clause.strip()):
        return "is an instruction to save, not an ask"
    if _WITHDRAWN.search(_CLAUSE_END.split(text[end : end + 200])[0]):
        return "is withdrawn later in the sentence"
    if _ABOUT.search(clause.replace(words, _MARK)):  # the words, marked: one pattern compiled once, not one per ask
        return _ABOUT_THEM
    if _questioned(text, start, end):
        return "is in a question that asks nothing of the memory"
    if _OPINION.search(clause) or _OTHERS.search(" ".join([*clause_before.split()[-2:], text[start:end]])):
        return _ABOUT_THEM
    return None
