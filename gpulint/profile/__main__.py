"""`python -m gpulint.profile [OPTIONS] -- COMMAND...`: the profile command on its own."""

from gpulint.profile.cli import profile

if __name__ == "__main__":
    profile(prog_name="gpulint profile")
