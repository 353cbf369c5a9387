"""A tiny PDF writer for tests: several pages of text lines, optional page labels, no dependency."""

from __future__ import annotations


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def multipage_pdf(pages: list[list[str]], labels: str | None = None) -> bytes:
    """A valid PDF with one page per entry of ``pages``, each showing its lines top to bottom.

    ``labels`` is the raw ``/PageLabels`` number tree's ``/Nums`` array content, e.g.
    ``"0 << /S /r >> 2 << /S /D >>"`` (pages 1-2 numbered i, ii; the rest 1, 2, ...).
    """
    n = len(pages)
    font = 3 + 2 * n
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    catalog = "<< /Type /Catalog /Pages 2 0 R" + (f" /PageLabels << /Nums [{labels}] >>" if labels else "") + " >>"
    objects: list[bytes] = [catalog.encode(), f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode()]
    for i, lines in enumerate(pages):
        body = " T* ".join(f"({_escape(line)}) Tj" for line in lines)
        stream = f"BT /F1 11 Tf 14 TL 72 750 Td {body} ET".encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body_bytes in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body_bytes + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
