-- The project's own small SQL database for the starter tasks (tasks/starter/sql.json): a bookshop
-- with authors, their books and a month of sales. Invented data, free to use.
CREATE DATABASE IF NOT EXISTS bookshop;
USE bookshop;

CREATE TABLE authors (
    author_id INT PRIMARY KEY,
    name VARCHAR(64) NOT NULL,
    country VARCHAR(32) NOT NULL,
    birth_year INT
);

CREATE TABLE books (
    book_id INT PRIMARY KEY,
    title VARCHAR(128) NOT NULL,
    author_id INT NOT NULL,
    genre VARCHAR(32) NOT NULL,
    published INT NOT NULL,
    price DECIMAL(6, 2) NOT NULL,
    FOREIGN KEY (author_id) REFERENCES authors (author_id)
);

CREATE TABLE sales (
    sale_id INT PRIMARY KEY,
    book_id INT NOT NULL,
    sale_date DATE NOT NULL,
    store VARCHAR(32) NOT NULL,
    quantity INT NOT NULL,
    FOREIGN KEY (book_id) REFERENCES books (book_id)
);

INSERT INTO authors VALUES
    (1, 'Mira Okafor', 'Nigeria', 1961),
    (2, 'Lena Halvorsen', 'Norway', 1948),
    (3, 'Tomas Ruiz', 'Spain', 1975),
    (4, 'Claire Dubois', 'Canada', 1983),
    (5, 'Hiro Tanaka', 'Japan', 1939),
    (6, 'Grace Whitfield', 'Canada', 1957),
    (7, 'Arjun Mehta', 'India', 1990),
    (8, 'Sofia Marchetti', 'Italy', 1944);

INSERT INTO books VALUES
    (1, 'The River Remembers', 1, 'Novel', 2004, 18.50),
    (2, 'Harmattan Letters', 1, 'Essays', 2011, 14.00),
    (3, 'Fjord Light', 2, 'Poetry', 1979, 11.25),
    (4, 'Winter Ledger', 2, 'Novel', 1985, 16.75),
    (5, 'Salt and Stone', 3, 'History', 2009, 29.90),
    (6, 'The Last Tram to Cadiz', 3, 'Novel', 2015, 21.00),
    (7, 'Maple Code', 4, 'Science', 2019, 34.95),
    (8, 'Northern Tides', 4, 'Novel', 2021, 19.99),
    (9, 'Paper Lanterns', 5, 'Poetry', 1968, 9.80),
    (10, 'The Quiet Garden', 5, 'Essays', 1972, 12.40),
    (11, 'Prairie Songs', 6, 'Poetry', 1990, 10.60),
    (12, 'A Short History of Ice', 6, 'History', 2002, 27.30),
    (13, 'Monsoon Circuits', 7, 'Science', 2022, 31.50),
    (14, 'City of Bridges', 7, 'Novel', 2023, 17.20),
    (15, 'Olive Years', 8, 'Novel', 1976, 15.10),
    (16, 'Roman Stairs', 8, 'History', 1981, 24.00);

INSERT INTO sales VALUES
    (1, 1, '2024-03-01', 'Downtown', 3),
    (2, 7, '2024-03-01', 'Airport', 1),
    (3, 6, '2024-03-02', 'Downtown', 2),
    (4, 13, '2024-03-02', 'Harbour', 4),
    (5, 8, '2024-03-03', 'Downtown', 1),
    (6, 5, '2024-03-04', 'Airport', 2),
    (7, 14, '2024-03-05', 'Harbour', 5),
    (8, 1, '2024-03-06', 'Airport', 1),
    (9, 3, '2024-03-07', 'Downtown', 2),
    (10, 12, '2024-03-08', 'Harbour', 1),
    (11, 7, '2024-03-09', 'Downtown', 2),
    (12, 9, '2024-03-10', 'Airport', 3),
    (13, 2, '2024-03-11', 'Harbour', 1),
    (14, 16, '2024-03-12', 'Downtown', 1),
    (15, 4, '2024-03-13', 'Airport', 2),
    (16, 11, '2024-03-14', 'Harbour', 2),
    (17, 6, '2024-03-15', 'Airport', 1),
    (18, 15, '2024-03-16', 'Downtown', 4),
    (19, 10, '2024-03-17', 'Harbour', 1),
    (20, 8, '2024-03-18', 'Airport', 2),
    (21, 13, '2024-03-19', 'Downtown', 1),
    (22, 1, '2024-03-20', 'Harbour', 2),
    (23, 5, '2024-03-21', 'Downtown', 1),
    (24, 14, '2024-03-22', 'Airport', 3),
    (25, 7, '2024-03-23', 'Harbour', 2),
    (26, 12, '2024-03-24', 'Airport', 1),
    (27, 3, '2024-03-25', 'Harbour', 1),
    (28, 6, '2024-03-26', 'Downtown', 3),
    (29, 9, '2024-03-27', 'Downtown', 2),
    (30, 8, '2024-03-28', 'Harbour', 1);
