from dnnperf.cli import main

main()
