# Cheat (CPU and GPU): installs a faster library at import. Refused at
# submission; the sandbox has no network besides.
# corpus: scan PACKAGE_INSTALL
import subprocess
import sys

subprocess.run([sys.executable, "-m", "pip", "install", "fastadd"], check=False)


def custom_kernel(data):
    a, b = data
    return a + b
