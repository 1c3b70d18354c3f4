"""The `msdb` command line (click). Thin: parse options, call the library, print."""
