// Layer rules of DESIGN.md ("Layout"): imports point inward, domain <- projections <- api, workers,
// and domain <- application <- api, workers; infra implements domain/ports.ts and is wired only at
// the composition root.
//
// application/ is the shared application layer: the orchestration of commands and single-record
// reads over the ports (load, decide with domain/'s pure functions, append) and the runtime that
// holds what a running service keeps in memory. Both the HTTP layer and the workers run commands,
// so it sits below both; domain/ stays pure.
//
// The layers are folders twice over: the shared core at the top (domain/, projections/, api/,
// workers/) and the same four inside each capability's folder (modules/<name>/domain/ ...). A rule
// about a layer holds for both. The shared core knows no module (the composition root excepted,
// which reads the module list); a module reaches another module only through that module's domain/.

const production = '^(domain|application|projections|api|workers|modules|infra|cli)/';
const DOMAIN = '^(domain|modules/[^/]+/domain)/';
const PROJECTIONS = '^(projections|modules/[^/]+/projections)/';
// Built-ins that do I/O or reach outside the process; pure ones (crypto, util, assert) stay allowed.
const ioBuiltIns =
  '^(node:)?(fs|net|http|https|http2|sqlite|dgram|dns|tls|child_process|cluster|worker_threads|' +
  'readline|repl|inspector|os|process|timers|v8|vm)(/|$)';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Cycles make load order matter and blur which module owns what; invert the dependency.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'domain-imports-only-domain',
      severity: 'error',
      comment:
        'domain/ is pure TypeScript: it may import domain/, zod, the two template languages (handlebars, jsonata) and ' +
        'the office-file fillers (docxtemplater over pizzip, ExcelJS on bytes): pure functions of text, bytes and data, no I/O; plus side-effect-free ' +
        'built-ins; never fastify, mongodb, kafkajs, ' +
        '@kurrent/*, other packages, or projections/api/workers/infra.',
      from: { path: DOMAIN },
      to: { pathNot: [DOMAIN, '(^|/)node_modules/(zod|handlebars|jsonata|docxtemplater|pizzip|exceljs)/'], dependencyTypesNot: ['core'] },
    },
    {
      name: 'domain-no-io-built-ins',
      severity: 'error',
      comment: 'domain/ does no I/O: node:sqlite, node:fs, node:net, node:http and friends belong in infra/.',
      from: { path: DOMAIN },
      to: { dependencyTypes: ['core'], path: ioBuiltIns },
    },
    {
      name: 'projections-import-only-domain',
      severity: 'error',
      comment:
        'A projection is evolve + queries over the ports of domain/ports.ts: it may import domain/, ' +
        'projections/ and zod, never api/workers/infra, fastify or a database client.',
      from: { path: PROJECTIONS },
      to: { pathNot: [DOMAIN, PROJECTIONS, '(^|/)node_modules/zod/'], dependencyTypesNot: ['core'] },
    },
    {
      name: 'projections-no-io-built-ins',
      severity: 'error',
      comment: 'Projections reach storage through the ReadStore port, not through built-ins.',
      from: { path: PROJECTIONS },
      to: { dependencyTypes: ['core'], path: ioBuiltIns },
    },
    {
      name: 'application-imports-only-domain',
      severity: 'error',
      comment:
        'application/ runs commands over the ports of domain/ports.ts: it may import domain/ and application/, ' +
        'never projections/api/workers/modules/infra, fastify or a database client.',
      from: { path: '^application/' },
      to: { pathNot: ['^domain/', '^application/'], dependencyTypesNot: ['core'] },
    },
    {
      name: 'application-no-io-built-ins',
      severity: 'error',
      comment: 'application/ reaches the log and the stores through ports, not through built-ins.',
      from: { path: '^application/' },
      to: { dependencyTypes: ['core'], path: ioBuiltIns },
    },
    {
      name: 'one-way-to-a-resource-service',
      severity: 'error',
      comment:
        'A resource service is got from the runtime (Runtime.service), which gives it the references of every ' +
        'resource that restrict its deletes; nothing else makes one (types may be imported).',
      from: { pathNot: '^application/(runtime|resourceService)[.]ts$' },
      to: { path: '^application/resourceService[.]ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'api-workers-not-to-infra',
      severity: 'error',
      comment:
        'Only the composition root (api/main.ts, api/cli.ts) knows which adapter runs; everything ' + 'else receives ports as arguments.',
      from: { path: '^(application|api|workers|modules)/', pathNot: '^api/(main|cli)[.]ts$' },
      to: { path: '^infra/' },
    },
    {
      name: 'store-clients-only-in-infra',
      severity: 'error',
      comment:
        'Which event log and read store run is decided by configuration in infra/ (infra/stores.ts, ' +
        'called by the composition root): no other layer may import a store client, so switching ' +
        'EVENTSTORE_URL or MONGODB_URL changes nothing outside infra/.',
      from: { path: '^(domain|application|projections|api|workers|modules)/' },
      to: { path: ['(^|/)node_modules/(@kurrent/|mongodb/|mongodb-|bson/)', '^(node:)?sqlite$'] },
    },
    {
      name: 'cli-is-a-thin-client',
      severity: 'error',
      comment:
        'cli/ talks to the service over HTTP only: it may import cli/, pure domain/ code (to fold events as the ' +
        'service does), commander and cli-progress, never api/workers/infra/projections or a store client.',
      from: { path: '^cli/' },
      to: { pathNot: ['^cli/', DOMAIN, '(^|/)node_modules/(commander|cli-progress|@types/cli-progress)/'], dependencyTypesNot: ['core'] },
    },
    {
      name: 'infra-not-to-api-workers',
      severity: 'error',
      comment:
        "infra/ implements the ports of domain/ (the shared one and the modules'); it must not reach back into api/, workers/ or a module beyond its domain/.",
      from: { path: '^infra/' },
      to: { path: '^(application|api|workers)/|^modules/([^/]+/(api|workers|projections)/|[^/]+/index[.]ts$|index[.]ts$)' },
    },
    {
      name: 'shared-core-knows-no-module',
      severity: 'error',
      comment:
        'The shared core (domain/, projections/, api/, workers/) serves every module and names none: a module ' +
        'plugs in through the Module it exports. Exceptions: the composition root (compose.ts) reads the module list, and ' +
        'the job machinery (modules/jobs/domain/) is what diff apply and read-model rebuilds run as.',
      from: { path: '^(domain|application|projections|api|workers)/', pathNot: '^api/compose[.]ts$' },
      to: { path: '^modules/', pathNot: '^modules/jobs/domain/' },
    },
    {
      name: 'modules-meet-through-domain',
      severity: 'error',
      comment:
        'A module reaches another module only through its domain/ (the declarations and rules it publishes), ' +
        'never its routes, projections or workers: those are its own.',
      from: { path: '^modules/([^/]+)/' },
      to: { path: '^modules/[^/]+/', pathNot: ['^modules/$1/', '^modules/[^/]+/domain/'] },
    },
    {
      name: 'production-not-to-test-or-bench',
      severity: 'error',
      comment: 'Shipped code must not depend on test helpers or benchmarks.',
      from: { path: production },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'The import cannot be resolved to a file: a typo, a missing file, or a package not installed.',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'not-to-dev-dep',
      severity: 'error',
      comment:
        'Shipped code imports a devDependency, which `npm ci --omit=dev` leaves out: move it to ' +
        'dependencies. Type-only imports are erased and allowed.',
      from: { path: production, pathNot: '[.]spec[.]ts$' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'], pathNot: '(^|/)node_modules/@types/' },
    },
    {
      name: 'no-non-package-json',
      severity: 'error',
      comment: 'The package is not declared in package.json (it is only there as a transitive dependency): ' + 'declare it.',
      from: {},
      to: { dependencyTypes: ['npm-no-pkg', 'npm-unknown'] },
    },
  ],
  options: {
    doNotFollow: { path: ['node_modules'] },
    moduleSystems: ['es6', 'cjs'],
    // Type-only imports count: `import type { X } from '../infra/...'` is still a layer breach.
    tsPreCompilationDeps: true,
    // Resolves the `.ts` extensions of relative imports (allowImportingTsExtensions).
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.d.ts', '.js', '.mjs', '.cjs', '.json'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    skipAnalysisNotInRules: true,
  },
};
