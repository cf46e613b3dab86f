-- Brightwell Engineering: a fictitious structural-engineering consultancy, the GRAMMAR demo domain.
-- Staff are identified by bird codenames, so no person, real or invented, is named.
-- Build it with evaluators.grammar_gen.open_source("data/grammar/company.sql").

CREATE TABLE clients (
    client_id VARCHAR PRIMARY KEY,
    name      VARCHAR NOT NULL UNIQUE,
    industry  VARCHAR NOT NULL,
    city      VARCHAR NOT NULL,
    country   VARCHAR NOT NULL
);

CREATE TABLE employees (
    employee_id VARCHAR PRIMARY KEY,
    name        VARCHAR NOT NULL UNIQUE,
    job_title   VARCHAR NOT NULL,
    department  VARCHAR NOT NULL,
    office      VARCHAR NOT NULL,
    manager_id  VARCHAR            -- the chief executive reports to no one
);

CREATE TABLE projects (
    project_id  VARCHAR PRIMARY KEY,
    name        VARCHAR NOT NULL UNIQUE,
    client_id   VARCHAR NOT NULL REFERENCES clients (client_id),
    director_id VARCHAR NOT NULL REFERENCES employees (employee_id),
    manager_id  VARCHAR NOT NULL REFERENCES employees (employee_id),
    city        VARCHAR NOT NULL,
    start_date  DATE NOT NULL,
    end_date    DATE NOT NULL,
    status      VARCHAR NOT NULL
);

INSERT INTO clients VALUES
    ('C01', 'Harbourline Ferries',          'maritime transport', 'Rotterdam',  'Netherlands'),
    ('C02', 'Greenfield Dairy Cooperative', 'food production',    'Cork',       'Ireland'),
    ('C03', 'Tallstack Data Centres',       'data centres',       'Frankfurt',  'Germany'),
    ('C04', 'Meridian Hospital Trust',      'healthcare',         'Leeds',      'United Kingdom'),
    ('C05', 'Copperleaf Hotels',            'hospitality',        'Lisbon',     'Portugal'),
    ('C06', 'Riverside Water Board',        'water utilities',    'Bristol',    'United Kingdom'),
    ('C07', 'Sunvale Energy',               'renewable energy',   'Seville',    'Spain'),
    ('C08', 'Bluegate Logistics',           'logistics',          'Antwerp',    'Belgium'),
    ('C09', 'Ironbridge Rail',              'rail transport',     'Manchester', 'United Kingdom'),
    ('C10', 'Lumen Retail Group',           'retail',             'Copenhagen', 'Denmark');

INSERT INTO employees VALUES
    ('E01', 'Osprey',     'Chief Executive',               'Executive',      'London',     NULL),
    ('E02', 'Heron',      'Director of Projects',          'Projects',       'London',     'E01'),
    ('E03', 'Kestrel',    'Director of Engineering',       'Engineering',    'Manchester', 'E01'),
    ('E04', 'Curlew',     'Senior Project Manager',        'Projects',       'London',     'E02'),
    ('E05', 'Lapwing',    'Project Manager',               'Projects',       'Bristol',    'E02'),
    ('E06', 'Plover',     'Project Manager',               'Projects',       'Manchester', 'E02'),
    ('E07', 'Avocet',     'Principal Structural Engineer', 'Engineering',    'Manchester', 'E03'),
    ('E08', 'Dunlin',     'Geotechnical Engineer',         'Engineering',    'Leeds',      'E03'),
    ('E09', 'Godwit',     'Building Services Engineer',    'Engineering',    'Bristol',    'E03'),
    ('E10', 'Sanderling', 'Sustainability Consultant',     'Sustainability', 'London',     'E03'),
    ('E11', 'Turnstone',  'Site Engineer',                 'Engineering',    'Leeds',      'E07'),
    ('E12', 'Redshank',   'Cost Estimator',                'Commercial',     'London',     'E02');

INSERT INTO projects VALUES
    ('P01', 'Harbour Lock Upgrade',       'C01', 'E02', 'E04', 'Rotterdam',  DATE '2022-03-14', DATE '2024-06-28', 'completed'),
    ('P02', 'Dairy Plant Extension',      'C02', 'E03', 'E05', 'Cork',       DATE '2023-01-09', DATE '2024-11-15', 'completed'),
    ('P03', 'North Data Hall',            'C03', 'E03', 'E06', 'Frankfurt',  DATE '2023-05-02', DATE '2025-08-29', 'in progress'),
    ('P04', 'Ward Block Retrofit',        'C04', 'E02', 'E04', 'Leeds',      DATE '2021-09-20', DATE '2023-12-01', 'completed'),
    ('P05', 'Copperleaf Riverside Hotel', 'C05', 'E02', 'E05', 'Porto',      DATE '2024-02-12', DATE '2026-04-30', 'in progress'),
    ('P06', 'Riverside Pumping Station',  'C06', 'E03', 'E06', 'Bristol',    DATE '2022-07-04', DATE '2025-03-31', 'in progress'),
    ('P07', 'Sunvale Solar Farm',         'C07', 'E03', 'E05', 'Seville',    DATE '2023-10-16', DATE '2025-06-13', 'in progress'),
    ('P08', 'Bluegate Freight Depot',     'C08', 'E02', 'E06', 'Rotterdam',  DATE '2021-04-26', DATE '2022-12-16', 'completed'),
    ('P09', 'Ironbridge Viaduct Repair',  'C09', 'E03', 'E04', 'Manchester', DATE '2024-06-03', DATE '2026-09-25', 'in progress'),
    ('P10', 'Lumen Flagship Store',       'C10', 'E02', 'E05', 'Copenhagen', DATE '2022-11-07', DATE '2023-10-20', 'completed');
