#!/usr/bin/env python3
"""Unit tests of scripts/mlxa2a-run's decisions, one branch at a time, with
fake programs and paths (tests/scripts/test_mlxa2a_run.sh and
test_launchers.sh run the whole script against real binaries and launchers).

    test_mlxa2a_run_unit.py <path of mlxa2a-run>
"""
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPT = None
mr = None  # the module


def load(path):
    loader = importlib.machinery.SourceFileLoader('mlxa2a_run', path)
    spec = importlib.util.spec_from_loader('mlxa2a_run', loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class TempDir(unittest.TestCase):
    """A scratch directory and helpers to put fake files in it."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='mlxa2a-run-unit.')
        self.addCleanup(shutil.rmtree, self.dir)

    def file(self, name, data=b'', mode=0o644):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.chmod(path, mode)
        return path

    def exe(self, name, data=b''):
        return self.file(name, data, 0o755)

    def tool(self, name, shell):
        """An executable shell script in <dir>/bin."""
        return self.exe('bin/' + name, '#!/bin/sh\n' + shell + '\n')

    def env(self, **extra):
        return dict({'PATH': os.path.join(self.dir, 'bin')}, **extra)

    def elf(self, name):
        return self.exe(name, b'\x7fELF\x02\x01\x01' + b'\0' * 9)


class ParseArgs(unittest.TestCase):
    def test_flags_and_command(self):
        o = mr.parse_args(['--which', '--dry-run', '-v', '--mpi', 'ompi', '--app', 'a',
                           'mpirun', '-np', '2', '--which'])
        self.assertEqual((o.which, o.dry_run, o.verbose, o.family, o.app),
                         (True, True, True, 'ompi', 'a'))
        self.assertEqual(o.command, ['mpirun', '-np', '2', '--which'])

    def test_equals_forms(self):
        o = mr.parse_args(['--mpi=mpich', '--app=./x', '--verbose', 'cmd'])
        self.assertEqual((o.family, o.app, o.verbose), ('mpich', './x', True))

    def test_double_dash_ends_options(self):
        self.assertEqual(mr.parse_args(['--', '--which']).command, ['--which'])

    def test_help_stops_parsing(self):
        self.assertTrue(mr.parse_args(['-h', '--bogus']).help)
        self.assertTrue(mr.parse_args(['--help']).help)

    def test_usage_errors(self):
        cases = {('--mpi',): '--mpi needs ompi or mpich',
                 ('--app',): '--app needs a PATH',
                 ('--mpi', 'openmpi', 'x'): '--mpi openmpi: expected ompi or mpich',
                 ('--mpi=', 'x'): '--mpi : expected ompi or mpich',
                 ('--bogus', 'x'): "unknown option '--bogus'",
                 ('-', 'x'): "unknown option '-'",
                 (): 'no command given',
                 ('--which',): 'no command given',
                 ('--app', 'x'): 'no command given'}
        for argv, message in cases.items():
            with self.subTest(argv=argv):
                with self.assertRaises(mr.UsageError) as e:
                    mr.parse_args(list(argv))
                self.assertEqual(str(e.exception), message)

    def test_which_needs_no_command_with_app_or_mpi(self):
        self.assertEqual(mr.parse_args(['--which', '--mpi', 'ompi']).command, [])
        self.assertEqual(mr.parse_args(['--which', '--app', 'x']).command, [])


class Usage(unittest.TestCase):
    def test_placeholders_say_not_installed(self):
        text = mr.usage('@LIB' + 'DIR@', '@REL@')
        self.assertIn('<this script\'s\ndir>/(none: not installed) (an installed', text)
        self.assertIn('the install\nlibdir (none: not installed)', text)

    def test_configured_paths(self):
        text = mr.usage('/opt/lib', '../lib')
        self.assertIn("dir>/../lib (an installed", text)
        self.assertIn('libdir (/opt/lib)', text)
        self.assertTrue(text.startswith('Usage: mlxa2a-run [options] <launcher-or-app>'))


class BashSplit(unittest.TestCase):
    def test_as_read_a(self):
        for value, sep, fields in [('', ':', []), ('a', ':', ['a']), ('a:', ':', ['a']),
                                   ('a::', ':', ['a', '']), (':a', ':', ['', 'a']),
                                   ('a::b', ':', ['a', '', 'b']), (':', ':', ['']),
                                   ('A,,B,', ',', ['A', '', 'B']), ('a\nb', ':', ['a'])]:
            with self.subTest(value=value):
                self.assertEqual(mr.bash_split(value, sep), fields)


class FindingTheApplication(TempDir):
    def test_is_elf(self):
        self.assertTrue(mr.is_elf(self.elf('app')))
        self.assertFalse(mr.is_elf(self.exe('script', '#!/bin/sh\n')))
        self.assertFalse(mr.is_elf(self.dir))
        self.assertFalse(mr.is_elf(os.path.join(self.dir, 'missing')))

    def test_find_in_path_as_type_p(self):
        a, b = os.path.join(self.dir, 'a'), os.path.join(self.dir, 'b')
        self.file('a/tool', 'x', 0o644)           # exists, not executable
        self.exe('b/tool', 'x')
        os.makedirs(os.path.join(self.dir, 'a/dir'))
        self.assertEqual(mr.find_in_path('tool', {'PATH': f'{a}:{b}'}), b + '/tool')
        self.assertEqual(mr.find_in_path('tool', {'PATH': a}), a + '/tool')
        self.assertIsNone(mr.find_in_path('dir', {'PATH': a}))
        self.assertIsNone(mr.find_in_path('', {'PATH': b}))
        self.assertIsNone(mr.find_in_path('tool', {}))
        cwd = os.getcwd()
        self.addCleanup(os.chdir, cwd)
        os.chdir(b)
        self.assertEqual(mr.find_in_path('tool', {'PATH': ':/nonexistent'}), './tool')

    def test_resolve_command(self):
        self.assertEqual(mr.resolve_command('./not/there', {}), './not/there')
        tool = self.tool('t', 'exit 0')
        self.assertEqual(mr.resolve_command('t', self.env()), tool)
        self.assertIsNone(mr.resolve_command('u', self.env()))

    def test_names(self):
        for word in ['mpirun', '/x/mpiexec', 'mpirun.openmpi', 'mpiexec.hydra', 'orterun',
                     'prterun', 'prun', 'srun', 'hydra_pmi_proxy']:
            self.assertTrue(mr.is_launcher(word), word)
        for word in ['mpirunner', './app', 'srun2', 'hydra']:
            self.assertFalse(mr.is_launcher(word), word)
        for word in ['python', 'python3', '/usr/bin/python3.11', 'python3.11-config']:
            self.assertTrue(mr.is_python(word), word)
        for word in ['python3x', 'ipython', 'python3.', 'pypy3']:
            self.assertFalse(mr.is_python(word), word)

    def test_option_values(self):
        for word, n in [('-np', 1), ('--map-by', 1), ('--export', 1), ('-x', 1),
                        ('--mca', 2), ('-genv', 2), ('--np=2', 0), ('-x=A', 0),
                        ('--oversubscribe', 0), ('-v', 0)]:
            self.assertEqual(mr.option_values(word), n, word)

    def test_shebang_interpreter(self):
        cases = {'#!/usr/bin/python3 -u\n': '/usr/bin/python3',
                 '#!  /usr/bin/env python3\n': 'python3',
                 '#!/usr/bin/env -S python3 -u\n': 'python3',
                 '#!/usr/bin/env\n': '',
                 '#!/usr/bin/python3': None,   # no newline: bash's read fails
                 'print(1)\n': None,
                 ' #!/usr/bin/python3\n': None}
        for text, interp in cases.items():
            with self.subTest(text=text):
                self.assertEqual(mr.shebang_interpreter(self.file('s', text)), interp)
        self.assertIsNone(mr.shebang_interpreter(self.dir))

    def test_program_of(self):
        app = self.elf('app')
        py = self.tool('python3', 'exit 0')   # a pyenv-like shim: a script
        env = self.env()
        self.assertEqual(mr.program_of(app, env), app)
        self.assertEqual(mr.program_of('python3', env), py)
        script = self.exe('app.py', '#!/usr/bin/env python3\nprint(1)\n')
        self.assertEqual(mr.program_of(script, env), py)
        self.assertIsNone(mr.program_of(self.exe('sh', '#!/bin/sh\n'), env))
        self.assertIsNone(mr.program_of(self.exe('p2', '#!/usr/bin/env python9\n'), env))
        self.assertIsNone(mr.program_of('missing', env))
        self.assertIsNone(mr.program_of(self.file('data', 'x\n'), env))

    def test_find_app(self):
        app = self.elf('app')
        env = self.env()
        self.assertEqual(mr.find_app([app, '-x'], env), app)
        self.assertIsNone(mr.find_app(['./missing', app], env))
        launched = ['mpirun', '-np', '2', '-x', app, '--mca', app, app, '--np=2', ':', app]
        self.assertEqual(mr.find_app(launched, env), app)
        # the value of -np and both of --mca are skipped; words that are no
        # program are passed over
        self.assertEqual(mr.find_app(['mpirun', '-np', app, '--mca', app, app, 'x', app], env),
                         app)
        self.assertIsNone(mr.find_app(['mpirun', '-np', app], env))
        # ':' separates MPMD contexts: never the application, even if such a file exists
        self.elf('bin/:')
        self.assertEqual(mr.find_app(['mpirun', ':', app], env), app)
        self.assertIsNone(mr.find_app(['srun', '-n', '2', 'nothing'], env))


def readelf(*sonames):
    """A fake readelf's script: a readelf -d listing that needs the sonames
    (shell builtins only: the tests' PATH holds just the fake tools)."""
    lines = ['Dynamic section at offset 0x2de8 contains 27 entries:',
             '  Tag        Type                         Name/Value']
    lines += [f' 0x0000000000000001 (NEEDED)             Shared library: [{s}]'
              for s in sonames + ('libc.so.6',)]
    return "printf '%s\\n' " + ' '.join(f"'{line}'" for line in lines)


class WhichMpi(TempDir):
    def test_families_of(self):
        f = mr.families_of
        self.assertEqual(f(['libc.so.6', 'libmpi.so.40']), ['ompi'])
        self.assertEqual(f(['libmpich.so.12']), ['mpich'])
        self.assertEqual(f(['libmpi.so.12']), ['mpich'])
        self.assertEqual(f(['libmpi.so.12', 'libmpi.so.40']), ['ompi', 'mpich'])
        self.assertEqual(f(['libmpi.so.40.1', 'xlibmpi.so.40']), [])
        self.assertEqual(f(['libmpi_mpifh.so.40']), [])
        self.assertEqual(f(['libmpi_mpifh.so.40'], bindings=True), ['ompi'])
        self.assertEqual(f(['libmpi_usempif08-gfortran.so.40'], bindings=True), ['ompi'])
        self.assertEqual(f(['libmpichfort.so.12'], bindings=True), ['mpich'])
        self.assertEqual(f([], bindings=True), [])

    def warnings(self):
        said = []
        return said, said.append

    def test_needed_of_readelf(self):
        self.tool('readelf', readelf('libmpi.so.40'))
        said, warn = self.warnings()
        self.assertEqual(mr.needed_of('x', self.env(), warn), ['libmpi.so.40', 'libc.so.6'])
        self.assertEqual(said, [])

    def test_needed_of_readelf_fails(self):
        self.tool('readelf', readelf('libmpi.so.40') + '\nexit 1')
        self.assertEqual(mr.needed_of('x', self.env(), print), [])

    def test_needed_of_objdump(self):
        self.tool('objdump', 'echo "  NEEDED               libmpich.so.12"; echo "  RUNPATH  /x"')
        self.assertEqual(mr.needed_of('x', self.env(), print), ['libmpich.so.12'])

    def test_needed_of_without_binutils(self):
        said, warn = self.warnings()
        self.assertEqual(mr.needed_of('/a/b', self.env(), warn), [])
        self.assertEqual(said, ['error: need readelf or objdump (binutils) to read /a/b'])

    def test_mpi_of_file_dt_needed(self):
        self.tool('readelf', readelf('libmpich.so.12'))
        self.tool('ldd', 'echo never; exit 1')
        self.assertEqual(mr.mpi_of_file('/app', self.env(), print),
                         (['mpich'], 'DT_NEEDED of /app'))

    def test_mpi_of_file_ldd_chain(self):
        self.tool('readelf', readelf('libmpi_mpifh.so.40'))
        self.tool('ldd', 'printf "\\tlinux-vdso.so.1 (0x0)\\n\\tlibmpi.so.40 => /l/libmpi.so.40'
                  ' (0x0)\\n\\n/lib64/ld-linux-x86-64.so.2 (0x0)\\n"')
        self.assertEqual(mr.mpi_of_file('/app', self.env(), print),
                         (['ompi'], 'ldd of /app'))

    def test_mpi_of_file_bindings(self):
        self.tool('readelf', readelf('libmpi_mpifh.so.40'))
        self.tool('ldd', 'echo "not a dynamic executable"; exit 1')
        self.assertEqual(mr.mpi_of_file('/app', self.env(), print),
                         (['ompi'], 'DT_NEEDED of /app (language bindings)'))
        os.remove(os.path.join(self.dir, 'bin/ldd'))   # no ldd at all
        self.assertEqual(mr.mpi_of_file('/app', self.env(), print),
                         (['ompi'], 'DT_NEEDED of /app (language bindings)'))

    def test_mpi_of_file_none(self):
        self.tool('readelf', readelf('libfoo.so.1'))
        self.assertEqual(mr.mpi_of_file('/app', self.env(), print),
                         ([], 'DT_NEEDED of /app (language bindings)'))

    def test_mpi4py_module_of(self):
        py = self.tool('python3', 'test "$1" = -c && test "$PYTHONPATH" = /pp && '
                       'printf "/m/MPI.so\\n\\n"')
        self.assertEqual(mr.mpi4py_module_of(py, self.env(PYTHONPATH='/pp')), '/m/MPI.so')
        self.assertIsNone(mr.mpi4py_module_of(py, self.env()))
        self.assertIsNone(mr.mpi4py_module_of(os.path.join(self.dir, 'none'), self.env()))


class ChooseFamily(TempDir):
    def choose(self, argv, env=None):
        notes = []
        fam = mr.choose_family(mr.parse_args(argv), env or self.env(), notes.append, print)
        return fam, notes

    def fails(self, argv, env=None):
        with self.assertRaises(mr.Failure) as e:
            self.choose(argv, env)
        return str(e.exception)

    def test_mpi_option_reads_nothing(self):
        self.assertEqual(self.choose(['--mpi', 'mpich', '/none']),
                         ('mpich', ['MPI: MPICH (from --mpi)']))

    def test_app_option(self):
        self.assertEqual(self.fails(['--app', 'nosuch', 'x']), '--app nosuch: not found')
        script = self.exe('s.sh', '#!/bin/sh\n')
        self.assertEqual(self.fails(['--app', script, 'x']),
                         f'--app {script}: not an ELF executable')

    def test_no_application(self):
        self.assertEqual(self.fails(['mpirun', '-np', '2', 'a b']),
                         "no ELF executable found in 'mpirun -np 2 a b'; name the application"
                         ' with --app PATH or its MPI with --mpi ompi|mpich')

    def test_found(self):
        app = self.elf('app')
        self.tool('readelf', readelf('libmpi.so.40'))
        self.assertEqual(self.choose(['mpirun', app]),
                         ('ompi', [f'application: {app}', f'MPI: Open MPI (from DT_NEEDED of {app})']))

    def test_none_and_both(self):
        app = self.elf('app')
        self.tool('readelf', readelf('libfoo.so'))
        self.assertIn('does not use a known MPI (no libmpi.so.40 for Open MPI, no '
                      'libmpich.so.12 for MPICH among its shared libraries); name the MPI '
                      'with --mpi ompi|mpich', self.fails([app]))
        self.tool('readelf', readelf('libmpi.so.40', 'libmpich.so.12'))
        self.assertEqual(self.fails([app]),
                         f'{app} links both Open MPI (libmpi.so.40) and MPICH (libmpich.so.12);'
                         ' mlxa2a cannot tell which one runs; name it with --mpi ompi|mpich')

    def test_python(self):
        self.tool('readelf', 'case "$3" in */MPI.so) ' + readelf('libmpich.so.12') +
                  ';; *) exit 1;; esac')
        self.tool('python3', 'test -n "$MODULE" && echo "$MODULE"')
        fam, notes = self.choose(['python3', 'app.py'], self.env(MODULE='/m/MPI.so'))
        self.assertEqual(fam, 'mpich')
        self.assertEqual(notes[1:], ["mpi4py's MPI module: /m/MPI.so",
                                     'MPI: MPICH (from DT_NEEDED of /m/MPI.so)'])
        self.assertIn('is a Python interpreter without mpi4py (its mpi4py.MPI module decides '
                      'the MPI); install mpi4py or name the MPI with --mpi ompi|mpich',
                      self.fails(['python3', 'app.py']))
        self.assertEqual(self.fails(['python3'], self.env(MODULE='/m/other.so')),
                         "mpi4py's MPI module /m/other.so uses no known MPI; name the MPI "
                         'with --mpi ompi|mpich')


class WhichShim(TempDir):
    def test_search_order(self):
        env = {'MLXA2A_LIBDIR': '/a::/b:'}
        self.assertEqual(mr.shim_search('/p/bin', env, '/usr/lib', '../lib'),
                         ['/a', '', '/b', '/p/bin/../lib', '/usr/lib', '/p/shim'])
        self.assertEqual(mr.shim_search('/p/bin', {}, '/usr/lib', '/abs/lib'),
                         ['/abs/lib', '/usr/lib', '/p/shim'])
        self.assertEqual(mr.shim_search('/p/scripts', {}, '@X@', '@Y@'), ['/p/shim'])

    def test_find_shim(self):
        real = os.path.join(self.dir, 'real')
        self.file('real/libmlxa2a-ompi.so')
        os.symlink(real, os.path.join(self.dir, 'link'))
        self.file('later/libmlxa2a-ompi.so')
        search = ['', os.path.join(self.dir, 'none'), os.path.join(self.dir, 'link'),
                  os.path.join(self.dir, 'later')]
        self.assertEqual(mr.find_shim('ompi', search), real + '/libmlxa2a-ompi.so')
        with self.assertRaises(mr.Failure) as e:
            mr.find_shim('mpich', ['/x', '', '/y'])
        self.assertEqual(str(e.exception),
                         'libmlxa2a-mpich.so (the mlxa2a shim for MPICH) not found; looked in: '
                         '/x  /y. Build it (scripts/build.sh) or set MLXA2A_LIBDIR.')

    def test_with_shim(self):
        self.assertEqual(mr.with_shim('/s.so', ''), '/s.so')
        self.assertEqual(mr.with_shim('/s.so', '/p.so'), '/s.so:/p.so')
        self.assertEqual(mr.with_shim('/s.so', '/p.so:/s.so'), '/p.so:/s.so')
        self.assertEqual(mr.with_shim('/s.so', '/s.so.1'), '/s.so:/s.so.1')


class Launchers(TempDir):
    def test_open_mpi_by_path_and_name(self):
        self.exe('openmpi/bin/orterun-real')
        os.symlink(os.path.join(self.dir, 'openmpi/bin/orterun-real'),
                   os.path.join(self.dir, 'mpirun'))
        self.assertTrue(mr.launcher_is_open_mpi(os.path.join(self.dir, 'mpirun'), {}))
        for name in ['orterun', 'prterun', 'prun', '/x/mpirun.openmpi']:
            self.assertTrue(mr.launcher_is_open_mpi(name, {}), name)
        for name in ['mpiexec.hydra', 'mpirun.mpich', 'srun']:
            self.assertFalse(mr.launcher_is_open_mpi(name, {}), name)

    def test_unknown_mpirun_is_asked(self):
        for out, rc, want in [('mpirun (Open MPI) 4.1.4', 0, True),
                              ('\\n\\nprterun (OpenRTE) 2.0', 0, True),
                              ('HYDRA build details:', 0, False),
                              ('mpirun (Open MPI) 4.1.4', 1, False),
                              ('a\\nb\\nc\\nOpen MPI', 0, False)]:
            with self.subTest(out=out, rc=rc):
                self.tool('mpirun', f'test "$1" = --version && printf "{out}\\n" >&2; exit {rc}')
                self.assertEqual(mr.launcher_is_open_mpi('mpirun', self.env()), want)
        self.assertFalse(mr.launcher_is_open_mpi('mpiexec', self.env()))

    def test_srun_export_value(self):
        v = mr.srun_export_value
        self.assertEqual(v('ALL', '/s'), 'ALL')
        self.assertEqual(v('HOME,PATH', '/s'), 'HOME,PATH,LD_PRELOAD')
        self.assertEqual(v('HOME,LD_PRELOAD', '/s'), 'HOME,LD_PRELOAD')
        self.assertEqual(v('ALL,LD_PRELOAD=/p', '/s'), 'ALL,LD_PRELOAD=/s:/p')
        self.assertEqual(v('LD_PRELOAD=/p:/s', '/s'), 'LD_PRELOAD=/p:/s')
        self.assertEqual(v('LD_PRELOAD=', '/s'), 'LD_PRELOAD=/s:')
        self.assertEqual(v('', '/s'), ',LD_PRELOAD')
        self.assertEqual(v(',A,,B,', '/s'), 'A,,B,LD_PRELOAD')
        for value in ['NONE', 'HOME,NIL']:
            with self.assertRaises(mr.Failure) as e:
                v(value, '/s')
            self.assertEqual(str(e.exception),
                             f'srun --export={value} (or SLURM_EXPORT_ENV) starts the ranks without'
                             ' LD_PRELOAD, so without mlxa2a. Use --export=ALL (srun\'s default),'
                             ' --export=ALL,<VAR=value>... or --export=<names>,LD_PRELOAD')

    def test_srun_keep_preload(self):
        k = mr.srun_keep_preload
        self.assertEqual(k(['srun', '-n', '2', '--export=HOME', 'a'], '/s', {}),
                         ['srun', '-n', '2', '--export=HOME,LD_PRELOAD', 'a'])
        self.assertEqual(k(['srun', '--export', 'HOME', 'a'], '/s', {}),
                         ['srun', '--export', 'HOME,LD_PRELOAD', 'a'])
        self.assertEqual(k(['srun', '--export'], '/s', {}), ['srun', '--export', ',LD_PRELOAD'])
        # the application's own --export, and SLURM_EXPORT_ENV
        self.assertEqual(k(['srun', 'a', '--export=NONE'], '/s', {}), ['srun', 'a', '--export=NONE'])
        self.assertEqual(k(['srun', '-n', '1', 'a'], '/s', {'SLURM_EXPORT_ENV': 'HOME'}),
                         ['srun', '--export=HOME,LD_PRELOAD', '-n', '1', 'a'])
        self.assertEqual(k(['srun', 'a'], '/s', {'SLURM_EXPORT_ENV': 'ALL'}), ['srun', 'a'])
        self.assertEqual(k(['srun', '--export=ALL', 'a'], '/s', {'SLURM_EXPORT_ENV': 'NONE'}),
                         ['srun', '--export=ALL', 'a'])
        with self.assertRaises(mr.Failure):
            k(['srun', 'a'], '/s', {'SLURM_EXPORT_ENV': 'NONE'})

    def test_launch_command(self):
        self.assertEqual(mr.launch_command(['mpirun.openmpi', '-np', '2', 'a'], '/s', {}),
                         ['mpirun.openmpi', '-x', 'LD_PRELOAD', '-np', '2', 'a'])
        self.assertEqual(mr.launch_command(['orterun', '-x', 'LD_PRELOAD', 'a'], '/s', {}),
                         ['orterun', '-x', 'LD_PRELOAD', 'a'])
        self.assertEqual(mr.launch_command(['mpiexec.mpich', 'a'], '/s', {}),
                         ['mpiexec.mpich', 'a'])
        self.assertEqual(mr.launch_command(['./a', '-x'], '/s', {}), ['./a', '-x'])
        self.assertEqual(mr.launch_command(['srun', '--export=A', 'a'], '/s', {}),
                         ['srun', '--export=A,LD_PRELOAD', 'a'])


class ShellQuote(unittest.TestCase):
    WORDS = ['', 'plain', '/a/b-c_d.e+f:g@h%', 'a b', 'x$y', "it's", '#c', 'a#b', '~d', 'a~b',
             'e=~f', 'g:~h', '\t', 'a\nb', '\x01', '\x7f', '\x1b', "\\'\t", 'é', 'ü ä',
             os.fsdecode(b'\xff'), '!"&()*,;<>?[]^`{|}']

    def test_fixed(self):
        self.assertEqual(mr.shell_quote(''), "''")
        self.assertEqual(mr.shell_quote('a b,c'), 'a\\ b\\,c')
        self.assertEqual(mr.shell_quote('#a#~b=~'), '\\#a#~b=\\~')
        self.assertEqual(mr.shell_quote('a\tb'), "$'a\\tb'")
        self.assertEqual(mr.shell_quote(os.fsdecode(b'\xff\x01')), "$'\\377\\001'")

    @unittest.skipIf(shutil.which('bash') is None, 'no bash to compare with')
    def test_as_bash_printf_q(self):
        args = [os.fsencode(w) for w in self.WORDS]
        env = dict(os.environ, LC_ALL='C.UTF-8')
        out = subprocess.run([b'bash', b'-c', b'printf "%q\\0" "$@"', b'q'] + args,
                             stdout=subprocess.PIPE, env=env, check=True).stdout
        want = [os.fsdecode(w) for w in out.split(b'\0')[:-1]]
        self.assertEqual([mr.shell_quote(w) for w in self.WORDS], want)


class WholeScript(TempDir):
    """The script run as a program: outputs and exit statuses. A copy in
    <dir>/bin that looks for shims in MLXA2A_LIBDIR only (as an uninstalled
    script outside a build tree)."""

    def setUp(self):
        super().setUp()
        with open(SCRIPT) as f:
            text = f.read()
        text = re.sub(r'(?m)^(install_libdir|libdir_from_bindir)=.*$', r"\1='@none'", text)
        self.script = self.exe('bin/mlxa2a-run', text)

    def run_script(self, *args, **env):
        full = dict(os.environ, MLXA2A_LIBDIR=os.path.join(self.dir, 'lib'))
        full.pop('LD_PRELOAD', None)
        full.update(env)
        return subprocess.run([self.script] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=full, text=True)

    def test_statuses(self):
        self.file('lib/libmlxa2a-ompi.so')
        shim = os.path.join(self.dir, 'lib/libmlxa2a-ompi.so')
        p = self.run_script('--help')
        self.assertEqual((p.returncode, p.stdout[:6]), (0, 'Usage:'))
        p = self.run_script('--bogus')
        self.assertEqual((p.returncode, p.stderr),
                         (2, "mlxa2a-run: unknown option '--bogus'\nTry 'mlxa2a-run --help'.\n"))
        p = self.run_script('--mpi', 'mpich', '--which', 'x')
        self.assertEqual(p.returncode, 1)
        self.assertTrue(p.stderr.startswith('mlxa2a-run: error: libmlxa2a-mpich.so (the '))
        p = self.run_script('-v', '--which', '--mpi', 'ompi')
        self.assertEqual((p.returncode, p.stdout), (0, shim + '\n'))
        self.assertEqual(p.stderr, f'mlxa2a-run: MPI: Open MPI (from --mpi)\nmlxa2a-run: shim: {shim}\n')
        p = self.run_script('--dry-run', '--mpi', 'ompi', 'mpiexec.mpich', 'a b', LD_PRELOAD='/p')
        self.assertEqual(p.stdout, f'LD_PRELOAD={shim}:/p mpiexec.mpich a\\ b\n')

    def test_exec(self):
        self.file('lib/libmlxa2a-ompi.so')
        shim = os.path.join(self.dir, 'lib/libmlxa2a-ompi.so')
        p = self.run_script('--mpi', 'ompi', 'sh', '-c', 'echo "$LD_PRELOAD" "$0"', 'z')
        self.assertEqual((p.returncode, p.stdout), (0, shim + ' z\n'))
        noshebang = self.exe('plain', 'echo shell "$1"\n')
        p = self.run_script('--mpi', 'ompi', noshebang, 'w')
        self.assertEqual((p.returncode, p.stdout), (0, 'shell w\n'))
        p = self.run_script('--mpi', 'ompi', 'no-such-command-mlxa2a')
        self.assertEqual(p.returncode, 127)
        self.assertTrue(p.stderr.endswith('exec: no-such-command-mlxa2a: not found\n'))
        p = self.run_script('--mpi', 'ompi', self.file('noexec', 'x'))
        self.assertEqual(p.returncode, 126)


if __name__ == '__main__':
    SCRIPT = os.path.abspath(sys.argv.pop(1))
    mr = load(SCRIPT)
    unittest.main(verbosity=2)
