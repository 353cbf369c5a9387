

def test_bm25s_import_does_not_force_debug_logging(monkeypatch):
    import logging

    import ragsieve.index.backends as backends

    monkeypatch.setattr(backends, "_BM25S_LOGGER_RESET", False)
    bm25s_logger = logging.getLogger("bm25s")
    monkeypatch.setattr(bm25s_logger, "level", logging.DEBUG)  # what `import bm25s` does on first import
    backends.import_bm25s()  # how ragsieve imports bm25s (to build an index, or read a method numpy cannot)
    assert bm25s_logger.level == logging.NOTSET
    bm25s_logger.setLevel(logging.DEBUG)  # an application's own later choice is kept
    backends.import_bm25s()
    assert bm25s_logger.level == logging.DEBUG
