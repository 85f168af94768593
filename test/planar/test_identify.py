"""Parameter identification (issue 11, item 3): the regressor against DFKI's equations, exact
recovery from noise-free data of a known model, and the fit on DFKI's real runs."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import yaml
from conftest import CONFIG, DATA
from support.dfki_reference import DFKI, dfki_tau, natural_state

from mbfg_ros.cli.identify import main as identify_main
from mbfg_ros.planar.dynamics import actuator_efforts
from mbfg_ros.core.errors import MbfgError
from mbfg_ros.planar.problems.identify import (
    IdentifyConfig,
    _body_unit_matrices,
    apply_parameters,
    identify,
    identify_regressed,
    identify_states,
    parameters,
    regress,
    regressor,
)
from mbfg_ros.planar.problems.measured import (
    DerivativeOptions, load_joint_csv, measured_inverse, torque_fit,
)
from mbfg_ros.planar.dynamics import build_system, load_system
from mbfg_ros.planar.forces import body_mass_matrix
from mbfg_ros.planar.mechanism_yaml import load_mechanism
from mbfg_ros.planar.model import Body

YAML = CONFIG / 'dfki_double_pendulum.yaml'
SYS = load_system(YAML)
RUN = {k: DATA / 'dfki' / f'design_A.0_20220815_sys_id_trajectory_{k}.csv' for k in ('01', '04')}
COLS = ['--position-columns', 'pos_meas1,pos_meas2', '--velocity-columns', 'vel_meas1,vel_meas2',
        '--effort-columns', 'tau_meas1,tau_meas2']


def random_states(count, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        q, qd, qdd = (rng.uniform(-np.pi, np.pi, 2), rng.uniform(-6, 6, 2),
                      rng.uniform(-40, 40, 2))
        out.append((q, qd, qdd, *natural_state(DFKI, q, qd, qdd)))
    return out


def test_body_unit_matrices_sum_to_the_body_mass_matrix():
    body = Body('b', (0, 1), 0.7, 1.3, 0.21, (0.25, -0.08))
    parts = _body_unit_matrices(body)
    M = (body.mass * parts['mass'][0] + body.mass * body.cog[0] * parts['mx'][0]
         + body.mass * body.cog[1] * parts['my'][0] + body.I0 * parts['I0'][0])
    np.testing.assert_allclose(M, body_mass_matrix(body), atol=1e-14)


def test_regressor_times_dfki_parameters_is_dfki_torque():
    """W π + τ0 with π from the YAML (DFKI model 2.0) equals DFKI's equations written out."""
    params = parameters(SYS.mech)
    pi = np.array([p.value for p in params])
    states = random_states(50, 0)
    Q = np.array([s[3] for s in states])
    Qd = np.array([s[4] for s in states])
    Qdd = np.array([s[5] for s in states])
    W, tau0 = regressor(SYS, params, Q, Qd, Qdd)
    ref = np.array([dfki_tau(DFKI, s[0], s[1], s[2]) for s in states])
    np.testing.assert_allclose(W @ pi + tau0, ref, atol=1e-9)


def test_noise_free_data_of_a_known_model_recovers_its_parameters():
    """Data from the package's inverse dynamics of a model whose identifiable parameters differ
    from the YAML by up to ±40 %; the parameters the data cannot separate are the YAML's."""
    params = parameters(SYS.mech)
    prior = np.array([p.value for p in params])
    rng = np.random.default_rng(5)
    truth = prior * rng.uniform(0.6, 1.4, len(prior))
    truth[[i for i, p in enumerate(params) if p.kind == 'my']] = [0.02, -0.01]   # cog off the axis
    truth[[i for i, p in enumerate(params) if p.name in (
        'shoulder_motor.Ir', 'link1.mass', 'link2.mass')]] = \
        prior[[i for i, p in enumerate(params) if p.name in (
            'shoulder_motor.Ir', 'link1.mass', 'link2.mass')]]
    true_sys = build_system(apply_parameters(SYS.mech, params, truth))
    sets = []
    for seed in (1, 2):
        states = random_states(150, seed)
        Q, Qd, Qdd = (np.array([s[k] for s in states]) for k in (3, 4, 5))
        tau = np.array([actuator_efforts(true_sys, *x) for x in zip(Q, Qd, Qdd)])
        sets.append((Q, Qd, Qdd, tau))
    res = identify_states(SYS, sets, IdentifyConfig(bounded=False))
    assert [params[i].name for i in range(len(params)) if i not in res.base] == [
        'shoulder_motor.Ir', 'link1.mass', 'link2.mass']
    np.testing.assert_allclose(res.values, truth, rtol=1e-6)
    assert res.rmse.max() < 1e-9
    # The reported base combinations: β = π_base + K π_other, from the truth.
    other = [i for i in range(len(params)) if i not in res.base]
    np.testing.assert_allclose(res.base_values, truth[list(res.base)] + res.combos @ truth[other],
                               rtol=1e-6)
    # link1.I0's combination is I0 + gr²·Ir_shoulder + l1²·m2 (the motor on the ground, link 2's
    # mass at the elbow): known in closed form.
    k = res.base.index(params.index(next(p for p in params if p.name == 'link1.I0')))
    assert res.combos[k] == pytest.approx([36.0, 0.0, 0.09], abs=1e-9)


def load_run(k):
    return load_joint_csv(RUN[k], ['shoulder', 'elbow'], ['pos_meas1', 'pos_meas2'],
                          ['vel_meas1', 'vel_meas2'], ['tau_meas1', 'tau_meas2'])


@pytest.fixture(scope='module')
def dfki_runs():
    return {k: load_run(k) for k in RUN}


def pooled_rmse(results):
    tau = np.vstack([r.tau[50:-50] for r in results])
    eff = np.vstack([r.effort[50:-50] for r in results])
    return np.sqrt(np.mean((tau - eff) ** 2, axis=0))


def test_fit_on_both_runs_is_within_10_percent_of_dfki_model(dfki_runs):
    res = identify(SYS, list(dfki_runs.values()))
    ours = pooled_rmse([res.predict(log) for log in dfki_runs.values()])
    theirs = pooled_rmse([measured_inverse(SYS, log) for log in dfki_runs.values()])
    assert (ours <= 1.1 * theirs).all(), (ours, theirs)
    assert np.isfinite(res.base_std).all() and (res.base_std > 0).all()
    big = [k for k, i in enumerate(res.base) if res.params[i].kind in ('I0', 'mx')]
    assert (res.base_std[big] < 0.02 * np.abs(res.base_values[big])).all()


def test_cross_validation_shoulder_within_10_percent(dfki_runs):
    for fit_on, test_on in (('01', '04'), ('04', '01')):
        res = identify(SYS, [dfki_runs[fit_on]])
        ours, _ = torque_fit(*res.predict(dfki_runs[test_on])[4:6], 50)
        theirs, _ = torque_fit(*measured_inverse(SYS, dfki_runs[test_on])[4:6], 50)
        assert ours[0] <= 1.1 * theirs[0], (fit_on, test_on, ours, theirs)


ON_AXIS = IdentifyConfig(fixed=('link1.my', 'link2.my'), weights='auto')


def cross_validated(runs, config):
    """(ours, DFKI's) torque RMSE per actuator for each (fit on, test on) pair."""
    out = []
    for fit_on, test_on in (('01', '04'), ('04', '01')):
        res = identify(SYS, [runs[fit_on]], config)
        ours, _ = torque_fit(*res.predict(runs[test_on])[4:6], 50)
        theirs, _ = torque_fit(*measured_inverse(SYS, runs[test_on])[4:6], 50)
        out.append((ours, theirs))
    return out


def test_centres_on_axis_and_auto_weights_narrow_the_elbow_cross_validation_gap(dfki_runs):
    """Holding the lateral first moments (centres of mass on the link axes) and weighting
    each actuator by 1/RMSE of a first fit generalise better to the other run than the
    plain fit (which is 1.20x / 1.58x DFKI's model on the elbow), the shoulder stays within
    10 %."""
    plain = cross_validated(dfki_runs, IdentifyConfig())
    tuned = cross_validated(dfki_runs, ON_AXIS)
    for (p, theirs), (t, _) in zip(plain, tuned):
        assert t[1] < p[1] and t[1] <= 1.2 * theirs[1], (p, t, theirs)
        assert t[0] <= 1.1 * theirs[0], (t, theirs)


@pytest.mark.xfail(reason='known limit: with the default Savitzky-Golay derivatives, fitted on '
                   'ONE run the elbow torque on the other run is 11-14 % worse than with DFKI\'s '
                   'model (fitted on all of the day\'s runs); single-run fits disagree on the '
                   'elbow friction (fc 0.04-0.12 N·m across the nine runs, bench/real_hardware.py '
                   'table 3). With the smoother\'s derivatives it is within 10 % (next test)',
                   strict=True)
def test_cross_validation_elbow_within_10_percent(dfki_runs):
    for ours, theirs in cross_validated(dfki_runs, ON_AXIS):
        assert ours[1] <= 1.1 * theirs[1], (ours, theirs)


def test_cross_validation_with_smoother_derivatives_within_10_percent(dfki_runs):
    """The issue's cross-validation with ``--derivatives smoother`` (its defaults, chosen on
    DFKI's model's torque error, not on this test): fitted on one run (centres on the link
    axes, weights auto), the torques on the other are within 10 % of DFKI's model's with the
    same derivatives, on both joints."""
    opts = DerivativeOptions('smoother')
    cfg = dataclasses.replace(ON_AXIS, derivatives=opts)
    for fit_on, test_on in (('01', '04'), ('04', '01')):
        res = identify(SYS, [dfki_runs[fit_on]], cfg)
        ours, _ = torque_fit(*res.predict(dfki_runs[test_on], opts)[4:6], 50)
        theirs, _ = torque_fit(*measured_inverse(SYS, dfki_runs[test_on], opts)[4:6], 50)
        assert (ours <= 1.1 * theirs).all(), (fit_on, test_on, ours, theirs)


OTHER_RUNS = sorted(p for p in (DATA / 'dfki').glob('design_A.0_20220815_sys_id_trajectory_*.csv')
                    if p.stem[-2:] not in RUN)


def test_held_out_fit_on_the_other_runs_is_within_10_percent_of_dfki_model(dfki_runs):
    """The like-for-like validation of DFKI's model, which its authors fitted on the day's
    runs: fitted on the seven other runs of 2022-08-15 (neither 01 nor 04 among them), the
    torques on 01 and on 04 are within 10 % of DFKI's model's RMSE on both joints."""
    assert len(OTHER_RUNS) == 7, OTHER_RUNS
    others = [load_joint_csv(p, ['shoulder', 'elbow'], ['pos_meas1', 'pos_meas2'],
                             ['vel_meas1', 'vel_meas2'], ['tau_meas1', 'tau_meas2'])
              for p in OTHER_RUNS]
    res = identify(SYS, others, ON_AXIS)
    for k, log in dfki_runs.items():
        ours, _ = torque_fit(*res.predict(log)[4:6], 50)
        theirs, _ = torque_fit(*measured_inverse(SYS, log)[4:6], 50)
        assert (ours <= 1.1 * theirs).all(), (k, ours, theirs)


def test_fixed_parameters_keep_their_yaml_values(dfki_runs):
    res = identify(SYS, [dfki_runs['01']], IdentifyConfig(fixed=('link2.my', 'elbow.b')))
    names = [p.name for p in res.params]
    assert 'link2.my' not in names and 'elbow.b' not in names and 'link1.my' in names
    yaml_body, body = SYS.mech.bodies[1], res.mech.bodies[1]
    assert body.mass * body.cog[1] == pytest.approx(yaml_body.mass * yaml_body.cog[1], abs=1e-12)
    assert res.mech.joints[1].friction.b == SYS.mech.joints[1].friction.b
    assert res.mech.joints[1].friction.fc != SYS.mech.joints[1].friction.fc   # still fitted
    with pytest.raises(MbfgError, match='fixed parameter.*link9.my unknown'):
        identify(SYS, [dfki_runs['01']], IdentifyConfig(fixed=('link9.my',)))


def test_auto_weights_reweight_by_the_first_fit(dfki_runs):
    """'auto' = the fit weighted by 1/RMSE of the unweighted fit; the elbow, whose residual is
    smaller, gains weight, so its RMSE drops and the shoulder's rises."""
    first = identify(SYS, [dfki_runs['01']])
    auto = identify(SYS, [dfki_runs['01']], IdentifyConfig(weights='auto'))
    manual = identify(SYS, [dfki_runs['01']], IdentifyConfig(weights=tuple(1 / first.rmse)))
    np.testing.assert_allclose(auto.values, manual.values, rtol=1e-9, atol=1e-12)
    assert auto.rmse[1] < first.rmse[1] and auto.rmse[0] > first.rmse[0]
    with pytest.raises(MbfgError, match="weights 'x'"):
        identify(SYS, [dfki_runs['01']], IdentifyConfig(weights='x'))


def test_cli_writes_a_yaml_that_reproduces_the_fit(tmp_path, capsys):
    out = tmp_path / 'id.yaml'
    assert identify_main([str(YAML), '--measured', str(RUN['01']), *COLS, '--output', str(out),
                          '--validate', str(RUN['04'])]) == 0
    text = capsys.readouterr().out
    assert '11 base parameters of 14' in text
    fit = [float(x) for x in re.search(r'fit RMSE per actuator: shoulder_motor ([0-9.]+), '
                                       r'elbow_motor ([0-9.]+)', text).groups()]
    assert re.search(r'validation on .*trajectory_04.csv: shoulder_motor RMSE [0-9.]+ N m', text)
    ident = load_system(out)
    res = measured_inverse(ident, load_run('01'))
    np.testing.assert_allclose(torque_fit(res.tau, res.effort, 50)[0], fit, atol=2e-4)
    doc = yaml.safe_load(out.read_text())
    assert doc['actuators'][1]['gr'] == -6.0 and doc['joints'][0]['friction']['smooth'] == 'atan'
    assert load_mechanism(out).joints[1].friction.b > 0


def test_cli_stribeck_writes_fs_and_v_st_that_reproduce_the_fit(tmp_path, capsys):
    out = tmp_path / 'id.yaml'
    assert identify_main([str(YAML), '--measured', str(RUN['01']), *COLS, '--stribeck',
                          '--output', str(out)]) == 0
    text = capsys.readouterr().out
    assert 'shoulder.fs' in text and 'elbow.fs' in text
    fit = [float(x) for x in re.search(r'fit RMSE per actuator: shoulder_motor ([0-9.]+), '
                                       r'elbow_motor ([0-9.]+)', text).groups()]
    doc = yaml.safe_load(out.read_text())
    for k in (0, 1):
        fr = doc['joints'][k]['friction']
        assert fr['fs'] != fr['fc'] and fr['v_st'] == 0.1, fr
    res = measured_inverse(load_system(out), load_run('01'))
    np.testing.assert_allclose(torque_fit(res.tau, res.effort, 50)[0], fit, atol=2e-4)


@pytest.mark.parametrize('args, message', [
    (['--effort-columns', ''], 'identification needs measured efforts'),
    (['--weights', '1,x'], "--weights: not numbers"),
    (['--weights', '1'], 'identify: 1 weights for 2 actuators'),
    (['--fix', 'link1.my,nope.b'], 'fixed parameter(s) nope.b unknown'),
])
def test_cli_errors(tmp_path, capsys, args, message):
    base = ['--position-columns', 'pos_meas1,pos_meas2', '--velocity-columns',
            'vel_meas1,vel_meas2']
    if '--effort-columns' not in args:
        base += ['--effort-columns', 'tau_meas1,tau_meas2']
    assert identify_main([str(YAML), '--measured', str(RUN['01']), *base, *args,
                          '--output', str(tmp_path / 'x.yaml')]) == 2
    assert message in capsys.readouterr().err


def test_fixed_parameters_enter_the_fit_at_their_yaml_values():
    """Noise-free data of a model whose lateral first moment and viscous friction are not zero;
    held at those (true, YAML) values, the other parameters are recovered exactly: the fixed
    columns are in the fit's τ0, not dropped with the body or joint they belong to."""
    params = parameters(SYS.mech)
    names = [p.name for p in params]
    truth = np.array([p.value for p in params])
    truth[names.index('link2.my')] = 0.03
    truth[names.index('elbow.b')] = 0.02
    truth[names.index('elbow.fc')] = 0.11
    true_mech = apply_parameters(SYS.mech, params, truth)
    true_sys = build_system(true_mech)
    states = random_states(200, 21)
    Q, Qd, Qdd = (np.array([s[k] for s in states]) for k in (3, 4, 5))
    tau = np.array([actuator_efforts(true_sys, *x) for x in zip(Q, Qd, Qdd)])
    start = dataclasses.replace(true_mech, bodies=tuple(
        dataclasses.replace(b, I0=1.3 * b.I0) for b in true_mech.bodies))
    cfg = IdentifyConfig(fixed=('link2.my', 'elbow.b'), bounded=False)
    res = identify_states(build_system(start), [(Q, Qd, Qdd, tau)], cfg)
    assert res.rmse.max() < 1e-9
    free = [p.name for p in res.params]
    kept = [i for i in res.base]
    np.testing.assert_allclose(res.values[kept], truth[[names.index(free[i]) for i in kept]],
                               rtol=1e-6, atol=1e-12)
    assert res.mech.joints[1].friction.b == 0.02


def test_stribeck_levels_are_recovered_from_noise_free_data():
    """Torques of a model with a Stribeck bump on both joints (fs > fc, v_st 0.5 rad/s, slow
    samples included); the YAML has none (its v_st is the same: the fit keeps v_st). With
    ``stribeck`` the fit recovers b, fc and fs exactly; without it, the bump is left in the
    residual."""
    rng = np.random.default_rng(31)
    joints = tuple(dataclasses.replace(j, friction=dataclasses.replace(
        j.friction, b=0.01 * (k + 1), fc=0.08 + 0.02 * k, fs=0.15 + 0.03 * k, v_st=0.5))
        if j.friction is not None else j for k, j in enumerate(SYS.mech.joints))
    true_sys = build_system(dataclasses.replace(SYS.mech, joints=joints))
    states = random_states(300, 32)
    Q, Qd, Qdd = (np.array([s[k] for s in states]) for k in (3, 4, 5))
    slow = rng.uniform(-0.8, 0.8, (100, 2))          # joint rates near v_st
    states_slow = [(q, qd, qdd, *natural_state(DFKI, q, qd, qdd)) for q, qd, qdd in zip(
        rng.uniform(-np.pi, np.pi, (100, 2)), slow, rng.uniform(-40, 40, (100, 2)))]
    Q = np.vstack((Q, [s[3] for s in states_slow]))
    Qd = np.vstack((Qd, [s[4] for s in states_slow]))
    Qdd = np.vstack((Qdd, [s[5] for s in states_slow]))
    tau = np.array([actuator_efforts(true_sys, *x) for x in zip(Q, Qd, Qdd)])
    yaml_sys = build_system(dataclasses.replace(SYS.mech, joints=tuple(
        dataclasses.replace(j, friction=dataclasses.replace(j.friction, v_st=0.5))
        if j.friction is not None else j for j in SYS.mech.joints)))
    with_fs = identify_states(yaml_sys, [(Q, Qd, Qdd, tau)],
                              IdentifyConfig(stribeck=True, bounded=False))
    got = {p.name: v for p, v in zip(with_fs.params, with_fs.values)}
    for k, j in enumerate(joints):
        if j.friction is None:
            continue
        for kind in ('b', 'fc', 'fs'):
            assert got[f'{j.name}.{kind}'] == pytest.approx(getattr(j.friction, kind),
                                                            rel=1e-6), (j.name, kind)
    assert with_fs.rmse.max() < 1e-9
    assert with_fs.mech.joints[1].friction.fs == pytest.approx(joints[1].friction.fs, rel=1e-6)
    without = identify_states(yaml_sys, [(Q, Qd, Qdd, tau)], IdentifyConfig(bounded=False))
    assert 'elbow.fs' not in [p.name for p in without.params]
    assert without.rmse.max() > 1e-3
    # A YAML with a Stribeck level gets fs as a parameter without asking.
    assert 'elbow.fs' in [p.name for p in parameters(true_sys.mech)]


def test_one_regression_serves_every_weighting_and_fixed_set(dfki_runs):
    """identify() equals identify_regressed() on data regressed once, for several configs."""
    data = [regress(SYS, [st], IdentifyConfig()) for st in (
        _states(dfki_runs['01']), _states(dfki_runs['04']))]
    for cfg in (IdentifyConfig(), ON_AXIS, IdentifyConfig(weights=(2.0, 1.0))):
        direct = identify(SYS, list(dfki_runs.values()), cfg)
        reused = identify_regressed(SYS, data, cfg)
        np.testing.assert_allclose(reused.values, direct.values, rtol=1e-10, atol=1e-14)
    with pytest.raises(MbfgError, match='regressed for other parameters'):
        identify_regressed(SYS, data, IdentifyConfig(rotor=False))


def _states(log):
    from mbfg_ros.planar.problems.measured import measured_states
    st = measured_states(SYS, log, IdentifyConfig().derivatives)
    s = slice(50, len(st.t) - 50)
    return st.q[s], st.qd[s], st.qdd[s], st.effort[s]


def test_bounds_keep_friction_non_negative():
    """A motion whose measured torque is the rigid model's minus friction-like torque: the
    unbounded fit makes fc negative, the bounded one stops at zero."""
    params = parameters(SYS.mech)
    states = random_states(100, 9)
    Q, Qd, Qdd = (np.array([s[k] for s in states]) for k in (3, 4, 5))
    rigid = dataclasses.replace(SYS.mech, joints=tuple(dataclasses.replace(j, friction=None)
                                                       for j in SYS.mech.joints))
    rs = build_system(rigid)
    tau = np.array([actuator_efforts(rs, *x) for x in zip(Q, Qd, Qdd)])
    tau -= 0.05 * np.sign(np.array([s[1] for s in states]))
    free = identify_states(SYS, [(Q, Qd, Qdd, tau)], IdentifyConfig(bounded=False))
    bound = identify_states(SYS, [(Q, Qd, Qdd, tau)], IdentifyConfig())
    i = [p.name for p in params].index('shoulder.fc')
    assert free.values[i] < -0.01 and bound.values[i] == pytest.approx(0.0, abs=1e-12)


def test_dfki_equations_with_one_shared_rotor_are_recovered_from_a_wrong_start():
    """Torques from DFKI's own equations (one Ir for both motors); the fit starts from a YAML
    whose identifiable values are off by up to ±40 % and recovers DFKI's values, the shared
    rotor inertia included (same_rotor makes it identifiable through the elbow)."""
    cfg = IdentifyConfig(same_rotor=True, bounded=False)
    params = parameters(SYS.mech, cfg)
    assert [p.name for p in params].count('rotors.Ir') == 1
    dfki = np.array([p.value for p in params])
    start = dfki * np.random.default_rng(8).uniform(0.6, 1.4, len(dfki))
    masses = [i for i, p in enumerate(params) if p.kind == 'mass']
    start[masses] = dfki[masses]                 # not identifiable: the YAML's values stay
    wrong = build_system(apply_parameters(SYS.mech, params, start))
    sets = []
    for seed in (11, 12):
        states = random_states(150, seed)
        Q, Qd, Qdd = (np.array([s[k] for s in states]) for k in (3, 4, 5))
        tau = np.array([dfki_tau(DFKI, s[0], s[1], s[2]) for s in states])
        sets.append((Q, Qd, Qdd, tau))
    res = identify_states(wrong, sets, cfg)
    assert [params[i].name for i in range(len(params)) if i not in res.base] == [
        'link1.mass', 'link2.mass']
    nonzero = np.abs(dfki) > 0
    np.testing.assert_allclose(res.values[nonzero], dfki[nonzero], rtol=1e-6)
    np.testing.assert_allclose(res.values[~nonzero], 0.0, atol=1e-9)
    assert res.values[[p.name for p in params].index('rotors.Ir')] == pytest.approx(
        DFKI['Ir'], rel=1e-6)
