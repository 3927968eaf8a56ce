"""python -m atp local: the local mode's command line (atp/local.py).

  python -m atp local --world_size=2 [--job=1] [--io_threads=1] [--print_job] [-- COMMAND...]

Starts atp-switchd and atp-ps for the job, then runs COMMAND with
ATP_LOCAL_JOB=<the job as JSON> (e.g. torchrun ...) and tears down when it
exits (--print_job: also print the job, one JSON line, first), or, with no
COMMAND, prints the job (one JSON line) and waits for EOF on stdin, SIGINT
or SIGTERM. Exit status: COMMAND's (128 + N when signal N killed it); 2
for bad flags, an $ATP_SWITCHD / $ATP_PS that names no executable file, or
an atp-switchd / atp-ps found nowhere; 1 when atp-switchd or atp-ps does not
start; 127 (126) when COMMAND is not found (not executable).
"""
import argparse
import sys

from atp import local


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m atp")
    sub = parser.add_subparsers(dest="tool", required=True)
    p = sub.add_parser("local", help="atp-switchd + atp-ps for one job on this machine")
    p.add_argument("--world_size", type=int, required=True, help="workers of the job, 1..32")
    p.add_argument("--job", type=int, default=1, help="job id, 1..255")
    p.add_argument("--io_threads", type=int, default=1, help="queues per worker, 1..16")
    p.add_argument("--ready_timeout_s", type=float, default=30.0)
    p.add_argument("--print_job", action="store_true",
                   help="print the job JSON even with COMMAND (without one it always is)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND to run inside")
    args = parser.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    try:
        cluster = local.LocalCluster(args.world_size, args.job, args.io_threads,
                                     args.ready_timeout_s)
        del cluster
    except ValueError as e:
        # The message names LocalCluster's argument; the flag of job_id is --job.
        message = str(e)
        if message.startswith("job_id:"):
            message = "job:" + message[len("job_id:"):]
        print("python -m atp local: --%s" % message, file=sys.stderr)
        return 2
    try:  # before anything starts: $ATP_SWITCHD / $ATP_PS name no program
        local.find_binary("atp-switchd")
        local.find_binary("atp-ps")
    except FileNotFoundError as e:
        local.print_cli_error(e)
        return 2
    return local.supervise(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
