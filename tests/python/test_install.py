"""make install PREFIX=P puts the package in P/lib/python3/site-packages/kvsd,
and that package finds P/lib/libkvs.so by itself."""
import os
import subprocess

from conftest import BUILD, ROOT


def test_installed_package_finds_its_library(tmp_path):
    prefix = tmp_path / "kvs"
    r = subprocess.run(["make", "-s", "-C", ROOT, "BUILD=" + BUILD, "PREFIX=" + str(prefix),
                        "install"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    site = prefix / "lib" / "python3" / "site-packages"
    assert (site / "kvsd" / "__init__.py").is_file()
    env = {k: v for k, v in os.environ.items() if k not in ("KVS_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    code = ("import kvsd, numpy as np\n"
            "print(kvsd.library)\n"
            "with kvsd.create('local') as kv:\n"
            "    kv.init('x', np.arange(3.0)); o = np.zeros(3); kv.pull('x', out=o)\n"
            "    kv.wait('x'); print(o.tolist())\n")
    r = subprocess.run(["/usr/bin/python3", "-c", code], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == [str(prefix / "lib" / "libkvs.so"), "[0.0, 1.0, 2.0]"]


def test_pip_install(tmp_path):
    """pip install ./python (pure Python: nothing is built) gives a package,
    kvsd.torch included, that runs against the library."""
    target = tmp_path / "site"
    r = subprocess.run(["/usr/bin/python3", "-m", "pip", "install", "--no-deps",
                        "--no-build-isolation", "--no-index", "--quiet", "--target", str(target),
                        os.path.join(ROOT, "python")], capture_output=True, text=True,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "kvsd" / "torch.py").is_file()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    code = ("import kvsd, numpy as np\n"
            "print(kvsd.__file__)\n"
            "with kvsd.create('local') as kv:\n"
            "    kv.init('x', np.arange(3.0)); o = np.zeros(3); kv.pull('x', out=o)\n"
            "    kv.wait('x'); print(o.tolist())\n")
    r = subprocess.run(["/usr/bin/python3", "-c", code], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == [str(target / "kvsd" / "__init__.py"), "[0.0, 1.0, 2.0]"]
