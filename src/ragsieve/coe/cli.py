"""``ragsieve coe``: extract evidence features, judge knowledge, perturb knowledge.

Examples::

    ragsieve coe extract "Were Scott Derrickson and Ed Wood of the same nationality?"
    ragsieve coe judge "Who directed Sinister?" -k "Sinister is a 2012 film by Scott Derrickson." --json
    ragsieve coe perturb irrelevant -k "Paris is in France." --pool noise.txt --proportion 0.5
"""

from __future__ import annotations

import logging
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from ragsieve.errors import InputError

app = typer.Typer(help="Chain of evidence: features, judgements, perturbations.", no_args_is_help=True)
logger = logging.getLogger(__name__)


class PerturbKind(str, Enum):
    senp = "senp"
    wordp = "wordp"
    irrelevant = "irrelevant"
    misinfo = "misinfo"


def _coe_config(config: Path | None, overrides: dict[str, Any]) -> tuple[Any, Any]:
    from ragsieve.config import PipelineConfig, load_config

    pipe = load_config(config) if config else PipelineConfig()
    data = pipe.stages.coe.model_dump(mode="json")
    data.update({k: v for k, v in overrides.items() if v is not None})
    from ragsieve.coe.config import load_coe_config

    return pipe, load_coe_config(data)


def _models(pipe: Any, need_llm: bool = True, need_embedder: bool = True) -> tuple[Any, Any]:
    llm = embedder = None
    if need_llm:
        from ragsieve.llm import load_llm

        llm = load_llm(pipe.llm)
        llm.warm_up()
    if need_embedder:
        from ragsieve.embed import load_embedder

        embedder = load_embedder(pipe.embedder)
        embedder.warm_up()
    return llm, embedder


def _knowledge(snippets: list[str] | None, file: Path | None) -> list[str]:
    out = list(snippets or [])
    if file is not None:
        if not file.is_file():
            raise InputError(f"knowledge file {file} does not exist; pass a file with one snippet per line")
        out += [line.strip() for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not out:
        raise InputError("no knowledge given; pass -k TEXT (repeatable) or --file with one snippet per line")
    return out


def _emit(data: Any, as_json: bool) -> None:
    from ragsieve.console import print_result

    print_result(data if isinstance(data, dict) else {"result": data}, as_json)


@app.command()
def extract(
    question: str = typer.Argument(..., help="The question."),
    config: Path | None = typer.Option(None, "--config", help="Pipeline config (stages.coe section)."),
    cache_dir: str | None = typer.Option(None, "--cache-dir", help="Cache features per question here."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Extract the intent, keywords and relations of a question."""
    from ragsieve.coe.features import FeatureExtractor

    pipe, cfg = _coe_config(config, {"cache_dir": cache_dir})
    llm, _ = _models(pipe, need_embedder=False)
    feats = FeatureExtractor(cfg.cache_dir, cfg.extraction_retries).extract(question, llm)
    _emit(feats.to_dict(), as_json)


@app.command()
def judge(
    question: str = typer.Argument(..., help="The question."),
    knowledge: list[str] | None = typer.Option(None, "-k", "--knowledge", help="A knowledge snippet."),
    file: Path | None = typer.Option(None, "--file", help="Text file, one snippet per line."),
    config: Path | None = typer.Option(None, "--config", help="Pipeline config (stages.coe section)."),
    intent_judge: str | None = typer.Option(None, help="embedding or llm."),
    keyword_judge: str | None = typer.Option(None, help="lexical, embedding, lexical+embedding or llm."),
    relation_judge: str | None = typer.Option(None, help="embedding or llm."),
    cover_method: str | None = typer.Option(None, "--cover", help="greedy, exact or auto."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Judge which features each snippet covers, and find the minimal covering set."""
    from ragsieve.coe.cover import cover
    from ragsieve.coe.features import FeatureExtractor
    from ragsieve.coe.judges import CoEDiscriminator

    snippets = _knowledge(knowledge, file)
    pipe, cfg = _coe_config(config, {"intent_judge": intent_judge, "keyword_judge": keyword_judge,
                                     "relation_judge": relation_judge, "cover": cover_method})
    llm, embedder = _models(pipe)
    feats = FeatureExtractor(cfg.cache_dir, cfg.extraction_retries).extract(question, llm)
    j = CoEDiscriminator(cfg, llm, embedder).judge(feats, snippets)
    res = cover(j.covered, j.kinds, cfg.cover, cfg.max_exact)
    _emit(
        {
            "features": feats.to_dict(),
            "judgements": j.to_records(),
            "has_coe": j.has_coe(),
            "covering_set": res.selected,
            "full_cover": res.full,
            "cover_method": res.method,
        },
        as_json,
    )


@app.command()
def perturb(
    kind: PerturbKind = typer.Argument(..., help="senp, wordp, irrelevant or misinfo."),
    knowledge: list[str] | None = typer.Option(None, "-k", "--knowledge", help="A knowledge snippet."),
    file: Path | None = typer.Option(None, "--file", help="Text file, one snippet per line."),
    question: str | None = typer.Option(None, "--question", help="Needed by senp, wordp, misinfo."),
    answer: list[str] | None = typer.Option(None, "--answer", help="Gold answer(s) (senp, wordp, misinfo)."),
    proportion: float = typer.Option(0.5, "--proportion", help="irrelevant: share of characters."),
    pool: Path | None = typer.Option(None, "--pool", help="irrelevant: file of irrelevant sentences."),
    wrong: str | None = typer.Option(None, "--wrong", help="misinfo: the wrong answer to inject."),
    generate: bool = typer.Option(False, "--generate", help="misinfo: also let the LLM write a passage."),
    seed: int = typer.Option(0, "--seed"),
    config: Path | None = typer.Option(None, "--config", help="Pipeline config (stages.coe section)."),
) -> None:
    """Perturb knowledge and print the result as JSON."""
    from ragsieve.coe import perturb as pt

    snippets = _knowledge(knowledge, file)
    answers = list(answer or [])
    out: dict[str, Any] = {"kind": kind.value, "original": snippets}
    if kind is PerturbKind.irrelevant:
        noise = _knowledge(None, pool) if pool else []
        if not noise:
            raise InputError("perturb irrelevant needs --pool FILE with irrelevant sentences, one per line")
        out["knowledge"] = pt.inject_irrelevant(snippets, noise, proportion, seed=seed)
        out["irrelevant_fraction"] = pt.irrelevant_fraction(snippets, [s for s in out["knowledge"]
                                                                       if s not in snippets])
    else:
        if not question or not answers:
            raise InputError(f"perturb {kind.value} needs --question and --answer")
        from ragsieve.coe.features import FeatureExtractor
        from ragsieve.coe.judges import CoEDiscriminator

        pipe, cfg = _coe_config(config, {})
        need_emb = kind is PerturbKind.senp
        llm, embedder = _models(pipe, need_embedder=need_emb)
        if kind is PerturbKind.senp:
            feats = FeatureExtractor(cfg.cache_dir, cfg.extraction_retries).extract(question, llm)
            j = CoEDiscriminator(cfg, llm, embedder).judge(feats, snippets)
            res = pt.sentence_perturbation(snippets, j.covered, j.kinds, answers)
            out.update(knowledge=[snippets[i] for i in res.kept], removed=res.removed, broken=res.broken)
        elif kind is PerturbKind.wordp:
            feats = FeatureExtractor(cfg.cache_dir, cfg.extraction_retries).extract(question, llm)
            new, used = pt.word_perturbation(snippets, feats.keywords, answers, llm=llm)
            out.update(knowledge=new, replacements=used)
        else:
            if not wrong:
                raise InputError("perturb misinfo needs --wrong ANSWER (a same-type wrong answer)")
            out["knowledge"] = pt.replace_answer(snippets, answers[0], wrong)
            if generate:
                out["generated"] = pt.generate_misinformation(question, wrong, llm)
    _emit(out, True)
