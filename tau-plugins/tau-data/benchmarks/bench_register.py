"""Hash-and-register throughput vs sha256sum, and upload throughput to Azurite (for scale only).

    python tau-plugins/tau-data/benchmarks/bench_register.py        (nox -s bench runs it)

TAU_BENCH_DATA_MIB sets the dataset size (default 1024 MiB). Both timings are whole processes on the
same bytes, each run after one warm-up read, best of TAU_BENCH_REPEAT (default 2).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(os.environ.get("TAU_REPO", Path(__file__).resolve().parents[3]))
MIB = 1024 * 1024
SIZE_MIB = int(os.environ.get("TAU_BENCH_DATA_MIB", "1024"))
REPEAT = int(os.environ.get("TAU_BENCH_REPEAT", "2"))
SHARDS = 8
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def make_dataset(root: Path) -> list[Path]:
    root.mkdir(parents=True)
    block = os.urandom(MIB)
    files = []
    for i in range(SHARDS):
        path = root / f"shard-{i:03d}.bin"
        with open(path, "wb") as fh:
            for j in range(SIZE_MIB // SHARDS):
                fh.write(block[j % 251:] + block[: j % 251])
        files.append(path)
    return files


def best_of(run) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_register(tmp: Path) -> None:
    files = make_dataset(tmp / "data")
    total = sum(f.stat().st_size for f in files)
    tau = shutil.which("tau") or sys.exit("tau is not installed")
    subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    base = best_of(lambda: subprocess.run(["sha256sum", *map(str, files)], stdout=subprocess.DEVNULL, check=True))
    counter = iter(range(100))

    def register() -> None:
        subprocess.run([tau, "data", "dataset", "register", f"bench@1.{next(counter)}", "--registry",
                        f"file://{tmp / 'registry'}", "--purpose", "pretrain", "--from", str(tmp / "data")],
                       stdout=subprocess.DEVNULL, check=True)

    ours = best_of(register)
    print(f"dataset: {total / MIB:.0f} MiB in {SHARDS} files")
    print(f"sha256sum (baseline):       {total / MIB / base:8.1f} MiB/s  ({base:.2f} s)")
    print(f"tau data dataset register:  {total / MIB / ours:8.1f} MiB/s  ({ours:.2f} s)")
    print(f"ratio register/sha256sum:   {base / ours:8.2f}  (target >= 0.80)")


def bench_azurite(tmp: Path) -> None:
    launcher = subprocess.run(["bash", str(REPO / "tests" / "tools" / "ensure-azurite.sh")], check=True,
                              capture_output=True, text=True).stdout.strip().splitlines()[-1]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([launcher, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
                             "--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"], cwd=tmp,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        from azure.core.credentials import AzureNamedKeyCredential
        from azure.storage.blob import BlobServiceClient

        from tau_data.azure import AzureBlobStore

        endpoint = f"http://127.0.0.1:{port}/{DEV_ACCOUNT}"
        cred = AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY)
        BlobServiceClient(endpoint, credential=cred).create_container("bench")
        store = AzureBlobStore(f"az://{DEV_ACCOUNT}/bench", credential=cred, account_url=endpoint)
        src = tmp / "data" / "shard-000.bin"
        size = src.stat().st_size
        copy = best_of(lambda: shutil.copyfile(src, tmp / "copy.bin"))
        counter = iter(range(100))

        def upload() -> None:
            with open(src, "rb") as fh:
                store.upload(f"shard-{next(counter)}.bin", fh)

        ours = best_of(upload)
        print(f"local file copy (baseline): {size / MIB / copy:8.1f} MiB/s  ({size / MIB:.0f} MiB)")
        print(f"upload to Azurite:          {size / MIB / ours:8.1f} MiB/s  (Azurite is not Azure; scale only)")
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tau-data-bench-") as tmp:
        bench_register(Path(tmp))
        bench_azurite(Path(tmp))


if __name__ == "__main__":
    main()
