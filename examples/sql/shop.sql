-- A small shop: the database every rollout of examples/sql starts from.
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    city TEXT NOT NULL,
    joined DATE NOT NULL
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price REAL NOT NULL
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    ordered DATE NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('placed', 'shipped', 'cancelled'))
);
CREATE TABLE order_items (
    order_id INTEGER NOT NULL REFERENCES orders(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL,
    PRIMARY KEY (order_id, product_id)
);

INSERT INTO customers VALUES
    (1, 'Ada Byron', 'London', '2023-01-15'),
    (2, 'Grace Hopper', 'New York', '2023-02-03'),
    (3, 'Alan Turing', 'London', '2023-03-22'),
    (4, 'Katherine Johnson', 'Hampton', '2023-05-09'),
    (5, 'Edsger Dijkstra', 'Amsterdam', '2023-06-30'),
    (6, 'Barbara Liskov', 'Boston', '2023-08-14'),
    (7, 'Donald Knuth', 'Stanford', '2023-11-02'),
    (8, 'Margaret Hamilton', 'Boston', '2024-01-20'),
    (9, 'Tim Berners-Lee', 'London', '2024-03-11'),
    (10, 'Frances Allen', 'New York', '2024-04-05');

INSERT INTO products VALUES
    (1, 'Notebook', 'stationery', 3.5),
    (2, 'Fountain pen', 'stationery', 24.0),
    (3, 'Pencil set', 'stationery', 6.25),
    (4, 'Desk lamp', 'home', 39.9),
    (5, 'Coffee mug', 'home', 8.0),
    (6, 'Wall clock', 'home', 27.5),
    (7, 'USB cable', 'electronics', 5.99),
    (8, 'Headphones', 'electronics', 59.0),
    (9, 'Keyboard', 'electronics', 45.0),
    (10, 'Mouse', 'electronics', 19.5),
    (11, 'Backpack', 'travel', 49.0),
    (12, 'Water bottle', 'travel', 12.0);

INSERT INTO orders VALUES
    (1, 1, '2024-01-05', 'shipped'),
    (2, 2, '2024-01-09', 'shipped'),
    (3, 1, '2024-02-14', 'shipped'),
    (4, 3, '2024-02-20', 'cancelled'),
    (5, 4, '2024-03-01', 'shipped'),
    (6, 5, '2024-03-15', 'shipped'),
    (7, 2, '2024-04-02', 'placed'),
    (8, 6, '2024-04-18', 'shipped'),
    (9, 8, '2024-05-07', 'shipped'),
    (10, 1, '2024-05-21', 'placed'),
    (11, 9, '2024-06-03', 'shipped'),
    (12, 3, '2024-06-19', 'shipped'),
    (13, 6, '2024-07-04', 'cancelled'),
    (14, 10, '2024-07-22', 'shipped'),
    (15, 2, '2024-08-09', 'shipped');

INSERT INTO order_items VALUES
    (1, 1, 3), (1, 2, 1),
    (2, 8, 1), (2, 7, 2),
    (3, 5, 2),
    (4, 4, 1),
    (5, 9, 1), (5, 10, 1),
    (6, 11, 1), (6, 12, 2),
    (7, 3, 4),
    (8, 6, 1), (8, 5, 1),
    (9, 8, 2),
    (10, 1, 10),
    (11, 4, 1), (11, 7, 3),
    (12, 2, 2),
    (13, 11, 1),
    (14, 12, 1), (14, 1, 5),
    (15, 9, 1), (15, 10, 2), (15, 7, 1);
