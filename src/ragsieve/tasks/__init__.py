"""Task-classifying RAG: route each request to information retrieval, text generation
or general QA, then take the matching path (HyDE retrieval, CRAG-style retrieval evaluation and
actions, generation-stage coverage/diversity reflection).

Example::

    from ragsieve import Pipeline
    from ragsieve.config import PipelineConfig

    cfg = PipelineConfig(index_dir="my-index", pipeline="task-adaptive",
                         stages={"tasks": {"classifier": "tfidf", "hyde": True, "evaluator": "trained"}})
    answer = Pipeline(cfg).ask("Write a short overview of graphene")
    answer.trace.stage("task"), answer.trace.stage("generation_reflection")

Modules: ``labels`` (task labels, bundled request set), ``classifier`` (LLM and TF-IDF task
classifiers), ``evaluator`` (trained and LLM retrieval evaluators), ``reflection`` (coverage,
distinct-2, regeneration loop), ``popqa`` (PopQA
retrieval pools and evaluator training data), ``cli`` (``ragsieve tasks train|eval``). The
preset's stages are in :mod:`ragsieve.sieve.adaptive`.
"""

from ragsieve.tasks.labels import TASK_LABELS, TaskLabel, TaskRequest, load_task_requests

__all__ = ["TASK_LABELS", "TaskLabel", "TaskRequest", "load_task_requests"]
